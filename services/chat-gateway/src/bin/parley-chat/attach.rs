//! `--attach FILE`: uploads a file (`UploadAttachment`) in chunks read as
//! they are sent, so a large file is never held in memory whole.

use std::path::Path;

use anyhow::{Context, Result};
use parley_proto::gateway::v1::{
    Attachment, AttachmentMetadata, PageContext, UploadAttachmentRequest,
    chat_gateway_client::ChatGatewayClient, upload_attachment_request::Part,
};
use tokio::io::AsyncReadExt;
use tonic::transport::Channel;

/// The bytes of one upload message.
const CHUNK: usize = 256 * 1024;

/// Uploads the file at `path` for `page`, as `token`'s user.
pub async fn upload(
    client: &mut ChatGatewayClient<Channel>,
    token: Option<&str>,
    page: &PageContext,
    path: &Path,
) -> Result<Attachment> {
    let mut file = tokio::fs::File::open(path)
        .await
        .with_context(|| format!("cannot open {}", path.display()))?;
    let size = file.metadata().await.map(|m| m.len()).unwrap_or(0);
    let name = path
        .file_name()
        .and_then(|name| name.to_str())
        .context("the file has no name")?
        .to_owned();
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    let first = UploadAttachmentRequest {
        part: Some(Part::Metadata(AttachmentMetadata {
            name,
            page: Some(page.clone()),
            size_bytes: size,
        })),
    };
    tx.send(first).await.ok();
    let reader = tokio::spawn(async move {
        let mut buffer = vec![0; CHUNK];
        loop {
            let read = file.read(&mut buffer).await?;
            if read == 0 {
                return Ok::<(), std::io::Error>(());
            }
            let chunk = UploadAttachmentRequest {
                part: Some(Part::Chunk(buffer[..read].to_vec())),
            };
            if tx.send(chunk).await.is_err() {
                // The call ended (refused): its status says why.
                return Ok(());
            }
        }
    });
    let request = crate::authorized(tokio_stream::wrappers::ReceiverStream::new(rx), token)?;
    let stored = client.upload_attachment(request).await;
    reader
        .await
        .context("the file reader stopped")?
        .with_context(|| format!("cannot read {}", path.display()))?;
    let stored = stored
        .map_err(|status| anyhow::anyhow!("{}: {}", status.code(), status.message()))
        .with_context(|| format!("cannot attach {}", path.display()))?;
    Ok(stored.into_inner())
}
