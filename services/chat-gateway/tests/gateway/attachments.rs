//! Attachments through the wire: uploaded in chunks and read back whole,
//! typed by their bytes, held to the size limit and the owner's quota, and
//! nothing left behind by an upload that was refused or cut short.
//!
//! The scenarios about where bytes are kept run twice: with the bytes in
//! the conversation store (`attachments.store = "db"`) and in an S3 object
//! store (`"s3"`, a local moto server, [`crate::moto`]).

use parley_proto::gateway::v1::{
    self as gw, download_attachment_response::Part as DownPart,
    upload_attachment_request::Part as UpPart,
};
use sha2::{Digest, Sha256};
use tokio_stream::StreamExt;
use tonic::{Code, Status, transport::Channel};
use tonic_types::StatusExt;

use crate::{
    auth::{authenticator, hs256},
    harness::{Harness, Options, reason, with_token},
};

/// A page that takes images, PDFs and CSV files.
fn registry() -> chat_gateway::registry::Registry {
    chat_gateway::registry::Registry::from_str(
        "version: 1\npages:\n  files:\n    attachments: [image/*, application/pdf, text/csv]\n  plain: {}\n",
        "files.yaml",
    )
    .expect("a valid registry")
}

/// `size` bytes that start as a PNG does (its signature and IHDR).
fn png(size: usize) -> Vec<u8> {
    let mut bytes = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
    let mut state: u32 = 0x9e37_79b9;
    while bytes.len() < size {
        state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        bytes.push((state >> 24) as u8);
    }
    bytes
}

/// The upload stream of `bytes` named `name` on `page`, in `chunk`-byte
/// messages, with `declared` as its size.
fn upload(
    name: &str,
    page: &str,
    bytes: &[u8],
    chunk: usize,
    declared: u64,
) -> impl tokio_stream::Stream<Item = gw::UploadAttachmentRequest> + use<> {
    let mut messages = vec![gw::UploadAttachmentRequest {
        part: Some(UpPart::Metadata(gw::AttachmentMetadata {
            name: name.into(),
            page: Some(gw::PageContext {
                page: page.into(),
                ..Default::default()
            }),
            size_bytes: declared,
        })),
    }];
    messages.extend(bytes.chunks(chunk).map(|part| gw::UploadAttachmentRequest {
        part: Some(UpPart::Chunk(part.to_vec())),
    }));
    tokio_stream::iter(messages)
}

async fn send(
    client: &mut parley_proto::gateway::v1::chat_gateway_client::ChatGatewayClient<Channel>,
    token: Option<&str>,
    stream: impl tokio_stream::Stream<Item = gw::UploadAttachmentRequest> + Send + 'static,
) -> Result<gw::Attachment, Status> {
    let mut request = tonic::Request::new(stream);
    if let Some(token) = token {
        request.metadata_mut().insert(
            "authorization",
            format!("Bearer {token}").parse().expect("header"),
        );
    }
    client
        .upload_attachment(request)
        .await
        .map(tonic::Response::into_inner)
}

/// The metadata and bytes of a download.
async fn download(
    client: &mut parley_proto::gateway::v1::chat_gateway_client::ChatGatewayClient<Channel>,
    request: tonic::Request<gw::DownloadAttachmentRequest>,
) -> Result<(gw::Attachment, Vec<u8>, usize), Status> {
    let mut stream = client.download_attachment(request).await?.into_inner();
    let mut metadata = None;
    let mut bytes = Vec::new();
    let mut chunks = 0;
    while let Some(message) = stream.message().await? {
        match message.part {
            Some(DownPart::Metadata(first)) => {
                assert!(metadata.is_none() && bytes.is_empty(), "metadata first");
                metadata = Some(first);
            }
            Some(DownPart::Chunk(chunk)) => {
                chunks += 1;
                bytes.extend_from_slice(&chunk);
            }
            None => panic!("an empty message"),
        }
    }
    Ok((metadata.expect("metadata"), bytes, chunks))
}

/// Where a scenario's gateway keeps attachment bytes.
enum Bytes {
    /// The conversation store's chunks.
    Db,
    /// An S3 bucket.
    S3(Box<crate::moto::Moto>),
}

impl Bytes {
    /// The object store, or `None` after `not_run` without moto.
    async fn s3(test: &str) -> Option<Self> {
        crate::moto::Moto::start(&format!("attachments::{test}"))
            .await
            .map(|moto| Self::S3(Box::new(moto)))
    }

    /// `options` writing the bytes here.
    fn options(&self, options: Options) -> Options {
        match self {
            Self::Db => options,
            Self::S3(moto) => Options {
                s3: Some(moto.config()),
                ..options
            },
        }
    }

    /// What holds the bytes of `files` of these sizes: chunk rows, or one
    /// object each.
    fn units(&self, files: &[usize]) -> u64 {
        match self {
            Self::Db => files
                .iter()
                .map(|size| size.div_ceil(chat_gateway::blobs::CHUNK_BYTES) as u64)
                .sum(),
            Self::S3(_) => files.len() as u64,
        }
    }

    /// The `PARLEY_ATTACHMENTS__...` variables of a gateway process.
    fn env(&self) -> Vec<(String, String)> {
        match self {
            Self::Db => Vec::new(),
            Self::S3(moto) => moto.env(),
        }
    }

    /// What the store at `url` and the bucket hold: unfinished uploads, and
    /// chunk rows or objects (a multipart upload left open counts as one).
    async fn left_at(&self, url: &str) -> (u64, u64) {
        let store = chat_gateway::store::Store::open(url, &Default::default())
            .await
            .expect("open the store");
        let uploading = store.uploads_in_progress().await.expect("count");
        let chunks = store.attachment_chunk_rows().await.expect("count");
        match self {
            Self::Db => (uploading, chunks),
            Self::S3(moto) => {
                assert_eq!(chunks, 0, "no chunk rows with the bytes in S3");
                (
                    uploading,
                    (moto.objects().await + moto.open_uploads().await) as u64,
                )
            }
        }
    }

    async fn left(&self, stack: &Harness) -> (u64, u64) {
        self.left_at(&stack.database_url).await
    }

    /// Waits (at most 10 s) for `left` to be `expected`.
    async fn settles(&self, stack: &Harness, expected: (u64, u64)) {
        let settled = tokio::time::timeout(std::time::Duration::from_secs(10), async {
            while self.left(stack).await != expected {
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
        })
        .await;
        assert!(
            settled.is_ok(),
            "left behind: {:?}, expected {expected:?}",
            self.left(stack).await
        );
    }
}

/// Rows an upload left behind: unfinished uploads and all chunk rows.
async fn left_behind(stack: &Harness) -> (u64, u64) {
    Bytes::Db.left(stack).await
}

#[tokio::test]
async fn a_file_uploaded_in_chunks_downloads_whole_and_only_for_its_owner() {
    // 1.5 MiB: six 256 KiB chunks.
    uploaded_in_chunks_and_downloaded_whole(Bytes::Db, 1_572_864).await;
}

#[tokio::test]
async fn a_file_uploaded_to_s3_downloads_whole_and_only_for_its_owner() {
    let Some(bytes) =
        Bytes::s3("a_file_uploaded_to_s3_downloads_whole_and_only_for_its_owner").await
    else {
        return;
    };
    // 12 MiB: a multipart upload of three parts (5, 5 and 2 MiB), read
    // back in 48 chunks.
    uploaded_in_chunks_and_downloaded_whole(bytes, 12 * 1024 * 1024).await;
}

async fn uploaded_in_chunks_and_downloaded_whole(place: Bytes, size: usize) {
    let mut stack = Harness::start(place.options(Options {
        auth: authenticator(),
        registry: Some(registry()),
        ..Options::default()
    }))
    .await;
    let ann = hs256("ann", "parley", 600);
    let bob = hs256("bob", "parley", 600);
    // In uneven 100 000-byte messages: stored as 256 KiB chunks.
    let bytes = png(size);
    let stored = send(
        &mut stack.client,
        Some(&ann),
        upload("screen.png", "files", &bytes, 100_000, bytes.len() as u64),
    )
    .await
    .expect("stored");
    let digest = format!("{:x}", Sha256::digest(&bytes));
    assert_eq!(
        (
            stored.name.as_str(),
            stored.media_type.as_str(),
            stored.size_bytes,
            stored.sha256.as_str()
        ),
        (
            "screen.png",
            "image/png",
            bytes.len() as u64,
            digest.as_str()
        )
    );
    assert!(stored.id.starts_with("att_"), "{}", stored.id);

    let (metadata, read, chunks) = download(
        &mut stack.client,
        with_token(
            gw::DownloadAttachmentRequest {
                attachment_id: stored.id.clone(),
            },
            &ann,
        ),
    )
    .await
    .expect("her file");
    assert_eq!(metadata, stored);
    assert_eq!(format!("{:x}", Sha256::digest(&read)), digest);
    assert_eq!(
        chunks,
        size.div_ceil(chat_gateway::blobs::CHUNK_BYTES),
        "in 256 KiB chunks"
    );
    assert_eq!(place.left(&stack).await, (0, place.units(&[size])));

    // Bob, an unknown id: the same NOT_FOUND.
    for (token, id) in [(&bob, stored.id.as_str()), (&ann, "att_0000")] {
        let refused = download(
            &mut stack.client,
            with_token(
                gw::DownloadAttachmentRequest {
                    attachment_id: id.into(),
                },
                token,
            ),
        )
        .await
        .expect_err("not found");
        assert_eq!(refused.code(), Code::NotFound);
        assert_eq!(reason(&refused), "ATTACHMENT_NOT_FOUND");
    }
    stack.stop().await;
}

#[tokio::test]
async fn types_come_from_the_bytes_and_the_page_must_take_them() {
    let mut stack = Harness::start(Options {
        registry: Some(registry()),
        ..Options::default()
    })
    .await;
    // A ZIP named .png.
    let mut zip = b"PK\x03\x04\x14\0\0\0\x08\0".to_vec();
    zip.resize(4096, 7);
    let refused = send(
        &mut stack.client,
        None,
        upload("photo.png", "files", &zip, 1024, 0),
    )
    .await
    .expect_err("a ZIP is not an image");
    assert_eq!(refused.code(), Code::InvalidArgument);
    assert_eq!(reason(&refused), "ATTACHMENT_TYPE_NOT_ALLOWED");
    assert!(refused.message().contains("application/zip"), "{refused:?}");

    // A page that takes no files refuses before any byte.
    let refused = send(
        &mut stack.client,
        None,
        upload("a.png", "plain", &png(100), 100, 0),
    )
    .await
    .expect_err("no attachments here");
    assert_eq!(reason(&refused), "ATTACHMENT_TYPE_NOT_ALLOWED");

    // Text with a .csv name is CSV; a PDF is a PDF.
    let csv = send(
        &mut stack.client,
        None,
        upload("sales.csv", "files", b"month,total\njan,10\n", 7, 0),
    )
    .await
    .expect("csv");
    assert_eq!(csv.media_type, "text/csv");
    let mut pdf = b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n".to_vec();
    pdf.resize(20_000, b' ');
    let pdf = send(
        &mut stack.client,
        None,
        upload("q3.pdf", "files", &pdf, 8192, 0),
    )
    .await
    .expect("pdf");
    assert_eq!(pdf.media_type, "application/pdf");
    assert_eq!(left_behind(&stack).await, (0, 2), "one chunk each");
    stack.stop().await;
}

#[tokio::test]
async fn a_file_past_the_limit_is_refused_and_leaves_nothing() {
    past_the_limit_leaves_nothing(Bytes::Db).await;
}

#[tokio::test]
async fn a_file_past_the_limit_leaves_no_object() {
    if let Some(bytes) = Bytes::s3("a_file_past_the_limit_leaves_no_object").await {
        past_the_limit_leaves_nothing(bytes).await;
    }
}

async fn past_the_limit_leaves_nothing(place: Bytes) {
    let mut stack = Harness::start(place.options(Options {
        registry: Some(registry()),
        ..Options::default()
    }))
    .await;
    // 25 MiB against the default 20 MiB, its size not declared: refused
    // once the bytes pass the limit, what was stored deleted.
    let bytes = png(25 * 1024 * 1024);
    let refused = send(
        &mut stack.client,
        None,
        upload("huge.png", "files", &bytes, 1024 * 1024, 0),
    )
    .await
    .expect_err("too large");
    assert_eq!(refused.code(), Code::InvalidArgument);
    assert_eq!(reason(&refused), "ATTACHMENT_TOO_LARGE");
    // Declared: refused before a byte is stored.
    let declared = send(
        &mut stack.client,
        None,
        upload(
            "huge.png",
            "files",
            &bytes[..1024],
            1024,
            bytes.len() as u64,
        ),
    )
    .await
    .expect_err("too large");
    assert_eq!(reason(&declared), "ATTACHMENT_TOO_LARGE");
    // The refused upload's rows go right after the refusal, and its
    // object's parts (four were sent) with them.
    place.settles(&stack, (0, 0)).await;
    stack.stop().await;
}

#[tokio::test]
async fn the_owners_quota_holds_and_refuses_with_quota_failure() {
    quota_holds(Bytes::Db).await;
}

#[tokio::test]
async fn the_owners_quota_holds_with_the_bytes_in_s3() {
    if let Some(bytes) = Bytes::s3("the_owners_quota_holds_with_the_bytes_in_s3").await {
        quota_holds(bytes).await;
    }
}

async fn quota_holds(place: Bytes) {
    let mut stack = Harness::start(place.options(Options {
        registry: Some(registry()),
        tweak: |config| config.attachments.per_user_bytes = 1024 * 1024,
        ..Options::default()
    }))
    .await;
    let bytes = png(600 * 1024);
    send(
        &mut stack.client,
        None,
        upload("one.png", "files", &bytes, 65_536, 0),
    )
    .await
    .expect("within the quota");
    // Undeclared: refused when it ends.
    let refused = send(
        &mut stack.client,
        None,
        upload("two.png", "files", &bytes, 65_536, 0),
    )
    .await
    .expect_err("over the quota");
    assert_eq!(refused.code(), Code::ResourceExhausted);
    assert_eq!(reason(&refused), "QUOTA_EXCEEDED");
    let failure = refused.get_details_quota_failure().expect("QuotaFailure");
    assert_eq!(
        failure.violations[0].description,
        "attachments.per_user_bytes = 1048576"
    );
    // Declared: refused before any byte.
    let declared = send(
        &mut stack.client,
        None,
        upload("two.png", "files", &bytes[..10], 10, bytes.len() as u64),
    )
    .await
    .expect_err("over the quota");
    assert_eq!(reason(&declared), "QUOTA_EXCEEDED");
    // The first file's bytes only: the refused one's object went too.
    place
        .settles(&stack, (0, place.units(&[bytes.len()])))
        .await;
    stack.stop().await;
}

#[tokio::test]
async fn deleting_a_conversation_deletes_its_files_bytes() {
    deleting_the_conversation_deletes_the_bytes(Bytes::Db).await;
}

#[tokio::test]
async fn deleting_a_conversation_deletes_its_files_objects() {
    if let Some(bytes) = Bytes::s3("deleting_a_conversation_deletes_its_files_objects").await {
        deleting_the_conversation_deletes_the_bytes(bytes).await;
    }
}

async fn deleting_the_conversation_deletes_the_bytes(place: Bytes) {
    let mut stack = Harness::start(place.options(Options {
        registry: Some(registry()),
        ..Options::default()
    }))
    .await;
    let (sent, kept) = (png(300_000), png(1000));
    let mut ids = Vec::new();
    for (name, bytes) in [("sent.png", &sent), ("kept.png", &kept)] {
        let stored = send(
            &mut stack.client,
            None,
            upload(name, "files", bytes, 64 * 1024, 0),
        )
        .await
        .expect("stored");
        ids.push(stored.id);
    }
    // The first is sent in a conversation (and so belongs to it); the
    // second never is.
    let turn = crate::harness::chat(
        &mut stack.client,
        message_with("", "What is this?", "files", &[&ids[0]]),
    )
    .await;
    assert!(turn.complete.success, "{:?}", turn.complete);
    let seen = stack.runner.seen();
    let messages = &seen.last().expect("a run").request.messages;
    let files = &messages.last().expect("the message").attachments;
    assert_eq!(files[0].data, sent, "the model got the bytes");
    assert_eq!(
        place.left(&stack).await,
        (0, place.units(&[sent.len(), kept.len()]))
    );
    stack
        .client
        .delete_conversation(gw::DeleteConversationRequest {
            conversation_id: turn.conversation_id(),
        })
        .await
        .expect("deleted");
    // Its file's bytes are gone with it (the object right after the
    // deletion committed); the other file stays.
    assert_eq!(place.left(&stack).await, (0, place.units(&[kept.len()])));
    let gone = download(
        &mut stack.client,
        tonic::Request::new(gw::DownloadAttachmentRequest {
            attachment_id: ids[0].clone(),
        }),
    )
    .await
    .expect_err("deleted with its conversation");
    assert_eq!(gone.code(), Code::NotFound);
    let (_, read, _) = download(
        &mut stack.client,
        tonic::Request::new(gw::DownloadAttachmentRequest {
            attachment_id: ids[1].clone(),
        }),
    )
    .await
    .expect("kept");
    assert_eq!(read, kept);
    stack.stop().await;
}

/// A runner whose `files` provider echoes the files it was given, with a
/// `plain` route to a model that takes text only and a `thumb` route to
/// one that takes images up to 100 pixels a side.
fn echoing_runner(dir: &std::path::Path) -> agent_runner::config::RunnerConfig {
    use agent_runner::{
        config::ProviderConfig,
        routes::{InputKind, RouteConfig},
    };
    let script = dir.join("files.toml");
    std::fs::write(
        &script,
        "model = \"vision\"\n[default]\nsteps = [{ echo = \"attachments\" }]\n",
    )
    .expect("write the script");
    let mut config = crate::real_stack::runner_config();
    config
        .providers
        .insert("files".into(), ProviderConfig::scripted(Some(script)));
    for (name, primary, input, max_image_edge) in [
        ("vision", "files/vision", vec![], None),
        ("plain", "files/text-only", vec![InputKind::Text], None),
        ("thumb", "files/thumb", vec![], Some(100)),
    ] {
        config.models.routes.insert(
            name.into(),
            RouteConfig {
                primary: primary.into(),
                fallbacks: Vec::new(),
                context_window: None,
                max_output_tokens: None,
                input,
                prices: None,
                max_image_bytes: None,
                max_image_edge,
            },
        );
    }
    config
}

fn message_with(conversation: &str, text: &str, page: &str, ids: &[&str]) -> gw::ChatRequest {
    let mut request = crate::harness::chat_request(conversation, text, page);
    request.attachments = ids
        .iter()
        .map(|id| gw::AttachmentRef {
            id: (*id).into(),
            inline: None,
        })
        .collect();
    request
}

#[tokio::test]
async fn an_attached_file_reaches_the_model_for_three_turns_and_a_model_without_eyes_refuses_or_is_told()
 {
    let dir = tempfile::tempdir().expect("dir");
    let runner_url = crate::real_stack::real_runner_with(echoing_runner(dir.path())).await;
    let mut stack = Harness::start(Options {
        runner_url: Some(runner_url),
        registry: Some(
            chat_gateway::registry::Registry::from_str(
                "version: 1\npages:\n  files:\n    attachments: [image/*, text/csv]\n    model: vision\n    models_allowed: [vision, plain]\n  \
                 told:\n    attachments: [image/*]\n    model: plain\n    attachments_unsupported: describe\n",
                "files.yaml",
            )
            .expect("a valid registry"),
        ),
        ..Options::default()
    })
    .await;
    let bytes = png(300_000);
    let digest = format!("{:x}", Sha256::digest(&bytes));
    let shown = format!(
        "screen.png (image/png, 300000 bytes, sha256 {})",
        &digest[..12]
    );
    let stored = send(
        &mut stack.client,
        None,
        upload("screen.png", "files", &bytes, 64 * 1024, 0),
    )
    .await
    .expect("stored");

    // The model gets the file, whole.
    let first = crate::harness::chat(
        &mut stack.client,
        message_with("", "What is on my screen?", "files", &[&stored.id]),
    )
    .await;
    assert!(first.complete.success, "{:?}", first.complete);
    assert_eq!(first.text, shown);
    let conversation = first.conversation_id();

    // The next two turns send it again with its message
    // (turns.history_attachment_turns = 2); the one after names it only.
    for (number, seen) in [(2, shown.as_str()), (3, shown.as_str()), (4, "no files")] {
        let next = crate::harness::chat(
            &mut stack.client,
            message_with(&conversation, &format!("Turn {number}?"), "files", &[]),
        )
        .await;
        assert_eq!(next.text, seen, "turn {number}");
    }
    let read = stack
        .client
        .get_conversation(gw::GetConversationRequest {
            conversation_id: conversation.clone(),
            ..Default::default()
        })
        .await
        .expect("get")
        .into_inner();
    let attached: Vec<&str> = read.messages[0]
        .attachments
        .iter()
        .map(|file| file.id.as_str())
        .collect();
    assert_eq!(attached, [stored.id.as_str()]);

    // A text-only model: the turn fails before any call...
    let mut plain = message_with("", "And this?", "files", &[&stored.id]);
    plain.model = "plain".into();
    let refused = crate::harness::chat(&mut stack.client, plain).await;
    assert!(!refused.complete.success);
    assert_eq!(
        refused.error.as_ref().map(|e| e.reason.as_str()),
        Some("ATTACHMENT_UNSUPPORTED"),
        "{:?}",
        refused.error
    );
    // ...unless the page has such files described.
    let told = crate::harness::chat(
        &mut stack.client,
        message_with("", "And this?", "told", &[&stored.id]),
    )
    .await;
    assert!(told.complete.success, "{:?}", told.complete);
    assert_eq!(
        told.text,
        "[file screen.png, image/png, 300000 bytes, not shown to this model]"
    );

    // An unknown id: refused before the turn begins.
    let refused = stack
        .client
        .chat(message_with("", "Read it", "files", &["att_unknown"]))
        .await
        .expect_err("unknown");
    assert_eq!(reason(&refused), "ATTACHMENT_NOT_FOUND");

    // Deleting the conversation deletes the file sent in it.
    stack
        .client
        .delete_conversation(gw::DeleteConversationRequest {
            conversation_id: conversation,
        })
        .await
        .expect("deleted");
    let gone = download(
        &mut stack.client,
        tonic::Request::new(gw::DownloadAttachmentRequest {
            attachment_id: stored.id.clone(),
        }),
    )
    .await
    .expect_err("deleted with its conversation");
    assert_eq!(gone.code(), Code::NotFound);
    stack.stop().await;
}

#[tokio::test]
async fn an_object_that_cannot_be_deleted_yet_is_kept_for_a_later_try() {
    use chat_gateway::{
        blobs::{Blobs, s3::S3Blobs},
        store::attachments::UploadObject,
    };
    let Some(Bytes::S3(moto)) =
        Bytes::s3("an_object_that_cannot_be_deleted_yet_is_kept_for_a_later_try").await
    else {
        return;
    };
    let dir = tempfile::tempdir().expect("dir");
    let url = format!("sqlite://{}?mode=rwc", dir.path().join("g.db").display());
    let store = chat_gateway::store::Store::open(&url, &Default::default())
        .await
        .expect("open the store");
    // A bucket that does not exist (yet): every request fails.
    let mut config = moto.config();
    config.bucket = "parley-late".into();
    let blobs = Blobs::with_s3(
        store.clone(),
        S3Blobs::new(&config, store.clone()).expect("a client"),
        true,
    );
    // An upload cut short whose row is gone already: its writer knows
    // its object.
    let object = UploadObject {
        key: "attachments/att_late".into(),
        upload_ref: None,
    };
    blobs
        .abort("att_late", Some(object))
        .await
        .expect("aborted");
    let waiting = store.object_purges(None, 10).await.expect("purges");
    assert_eq!(waiting.len(), 1, "kept, not forgotten");
    assert_eq!(waiting[0].attempts, 1, "tried once");
    // Once the bucket answers, a later try (the prune tick's) deletes it.
    moto.put("parley-late", "", Vec::new()).await;
    moto.put("parley-late", "attachments/att_late", b"bytes".to_vec())
        .await;
    assert_eq!(moto.objects_in("parley-late").await, 1);
    assert_eq!(blobs.purge_pending().await.expect("purged"), 1);
    assert_eq!(moto.objects_in("parley-late").await, 0);
    assert!(
        store
            .object_purges(None, 10)
            .await
            .expect("purges")
            .is_empty()
    );
}

#[tokio::test]
async fn a_gateway_killed_mid_upload_leaves_nothing_readable_and_a_file_from_one_replica_is_sent_by_another()
 {
    killed_mid_upload(
        "a_gateway_killed_mid_upload_leaves_nothing_readable_and_a_file_from_one_replica_is_sent_by_another",
        Bytes::Db,
    )
    .await;
}

#[tokio::test]
async fn a_gateway_killed_mid_upload_to_s3_leaves_no_object_after_the_sweep() {
    let test = "a_gateway_killed_mid_upload_to_s3_leaves_no_object_after_the_sweep";
    if let Some(bytes) = Bytes::s3(test).await {
        killed_mid_upload(test, bytes).await;
    }
}

async fn killed_mid_upload(test: &str, place: Bytes) {
    use crate::harness::process::{GatewayProcess, ProcessConfig};
    let Some((database_url, schema)) =
        crate::postgres::fresh_schema(&format!("attachments::{test}")).await
    else {
        return;
    };
    let options = Options::default();
    let (runner, runner_addr, parser_addr, _parser) =
        crate::harness::start_upstreams(&options).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let registry = dir.path().join("files.yaml");
    std::fs::write(
        &registry,
        "version: 1\npages:\n  files:\n    attachments: [image/*]\n",
    )
    .expect("write the registry");
    let registry = registry.display().to_string();
    let mut env = vec![
        ("PARLEY_REGISTRY".to_owned(), registry),
        (
            "PARLEY_ATTACHMENTS__UPLOAD_TIMEOUT".to_owned(),
            "3s".to_owned(),
        ),
    ];
    env.extend(place.env());
    let env: Vec<(&str, &str)> = env
        .iter()
        .map(|(name, value)| (name.as_str(), value.as_str()))
        .collect();
    let config = ProcessConfig {
        database_url: database_url.clone(),
        runner: runner_addr,
        parser: parser_addr,
        lease_renew: std::time::Duration::from_millis(200),
        lease_ttl: std::time::Duration::from_secs(2),
        stream_ahead: 0,
        per_user_concurrent_turns: 0,
    };
    let mut a = GatewayProcess::start_with(&config, dir.path(), "a", None, &env).await;
    let mut b = GatewayProcess::start_with(&config, dir.path(), "b", None, &env).await;

    // A file uploaded on A...
    let bytes = png(700_000);
    let stored = send(
        &mut a.client,
        None,
        upload("shot.png", "files", &bytes, 100_000, 0),
    )
    .await
    .expect("stored on A");

    // ...and another whose upload A is killed in the middle of: in the
    // store, its first chunks; in S3, a multipart upload whose first part
    // (5 MiB) is on its way.
    let (cut_size, message) = match place {
        Bytes::Db => (600_000, 100_000),
        Bytes::S3(_) => (8 * 1024 * 1024, 1024 * 1024),
    };
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    for message in upload("half.png", "files", &png(cut_size), message, 0)
        .collect::<Vec<_>>()
        .await
    {
        tx.send(message).await.expect("queued");
    }
    let mut client = a.client.clone();
    let cut = tokio::spawn(async move {
        send(
            &mut client,
            None,
            tokio_stream::wrappers::ReceiverStream::new(rx),
        )
        .await
    });
    let written = tokio::time::timeout(std::time::Duration::from_secs(10), async {
        let store = chat_gateway::store::Store::open(&database_url, &Default::default())
            .await
            .expect("open the store");
        loop {
            let begun = match place {
                Bytes::Db => store.uploads_in_progress().await.expect("count") == 1,
                // Its multipart upload created and recorded.
                Bytes::S3(_) => store.uploads_with_parts().await.expect("count") == 1,
            };
            if begun {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(written.is_ok(), "the upload never began");
    a.kill().await;
    drop(tx);
    assert!(
        cut.await.expect("joined").is_err(),
        "the upload was cut off"
    );
    let (uploading, _) = place.left_at(&database_url).await;
    assert_eq!(uploading, 1, "the killed gateway could not clean up");

    // B sends A's file to the model, whole.
    let turn = crate::harness::chat(
        &mut b.client,
        message_with("", "What is this?", "files", &[&stored.id]),
    )
    .await;
    assert!(turn.complete.success, "{:?}", turn.complete);
    let seen = runner.seen();
    let sent = &seen.last().expect("a run").request.messages;
    let files = &sent.last().expect("the message").attachments;
    assert_eq!(files.len(), 1);
    assert_eq!(
        format!("{:x}", Sha256::digest(&files[0].data)),
        stored.sha256
    );
    assert_eq!(files[0].media_type, "image/png");

    // The cut upload was never readable, and a replica started once twice
    // its timeout has passed sweeps it, its object's multipart upload
    // aborted (A's file stays).
    tokio::time::sleep(std::time::Duration::from_millis(6_500)).await;
    let mut c = GatewayProcess::start_with(&config, dir.path(), "c", None, &env).await;
    let expected = (0, place.units(&[bytes.len()]));
    let swept = tokio::time::timeout(std::time::Duration::from_secs(20), async {
        loop {
            if place.left_at(&database_url).await == expected {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    })
    .await;
    assert!(
        swept.is_ok(),
        "left behind: {:?}, expected {expected:?}",
        place.left_at(&database_url).await
    );
    b.kill().await;
    c.kill().await;
    crate::postgres::drop_schema(&schema).await;
}

#[tokio::test]
async fn parley_chat_attaches_a_file_to_its_first_message() {
    let dir = tempfile::tempdir().expect("dir");
    let runner_url = crate::real_stack::real_runner_with(echoing_runner(dir.path())).await;
    let stack = Harness::start(Options {
        runner_url: Some(runner_url),
        registry: Some(
            chat_gateway::registry::Registry::from_str(
                "version: 1\npages:\n  files:\n    attachments: [text/csv]\n    model: vision\n",
                "files.yaml",
            )
            .expect("a valid registry"),
        ),
        ..Options::default()
    })
    .await;
    let file = dir.path().join("sales.csv");
    std::fs::write(&file, "month,total\njan,10\n").expect("write");
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_parley-chat"))
        .arg("--gateway")
        .arg(format!("http://{}", stack.addr))
        .args(["--plain", "--page", "files", "--attach"])
        .arg(&file)
        .args(["What is this?", "And now?"])
        .output()
        .await
        .expect("run parley-chat");
    let printed = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{printed}");
    assert!(
        printed.contains("attached sales.csv (text/csv, 19 bytes)"),
        "{printed}"
    );
    // The first message carried it, and the model saw it again with the
    // second (the history sends the last turns' files).
    let digest = format!("{:x}", Sha256::digest(b"month,total\njan,10\n"));
    let line = format!("sales.csv (text/csv, 19 bytes, sha256 {})", &digest[..12]);
    assert_eq!(printed.matches(&line).count(), 2, "{printed}");
    stack.stop().await;
}

#[tokio::test]
async fn uploads_at_once_are_bounded_per_user() {
    let mut stack = Harness::start(Options {
        registry: Some(registry()),
        tweak: |config| config.attachments.uploads_per_user = 1,
        ..Options::default()
    })
    .await;
    // One upload holds its stream open...
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    for message in upload("slow.png", "files", &png(300_000), 100_000, 0)
        .collect::<Vec<_>>()
        .await
    {
        tx.send(message).await.expect("queued");
    }
    let mut client = stack.client.clone();
    let slow = tokio::spawn(async move {
        send(
            &mut client,
            None,
            tokio_stream::wrappers::ReceiverStream::new(rx),
        )
        .await
    });
    let begun = tokio::time::timeout(std::time::Duration::from_secs(10), async {
        while left_behind(&stack).await.0 != 1 {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(begun.is_ok(), "the upload never began");
    // ...so a second one is refused at once.
    let refused = send(
        &mut stack.client,
        None,
        upload("two.png", "files", &png(1000), 1000, 0),
    )
    .await
    .expect_err("one upload at a time");
    assert_eq!(reason(&refused), "QUOTA_EXCEEDED");
    let failure = refused.get_details_quota_failure().expect("QuotaFailure");
    assert_eq!(
        failure.violations[0].description,
        "attachments.uploads_per_user = 1"
    );
    // Once the first ends, another may start.
    drop(tx);
    slow.await.expect("joined").expect("the first is stored");
    send(
        &mut stack.client,
        None,
        upload("two.png", "files", &png(1000), 1000, 0),
    )
    .await
    .expect("room again");
    stack.stop().await;
}

#[tokio::test]
async fn an_image_over_the_models_limit_is_downscaled_for_it_and_kept_whole() {
    let dir = tempfile::tempdir().expect("dir");
    let runner_url = crate::real_stack::real_runner_with(echoing_runner(dir.path())).await;
    let mut stack = Harness::start(Options {
        runner_url: Some(runner_url),
        registry: Some(
            chat_gateway::registry::Registry::from_str(
                "version: 1\npages:\n  thumbs:\n    attachments: [image/*]\n    model: thumb\n",
                "thumbs.yaml",
            )
            .expect("a valid registry"),
        ),
        ..Options::default()
    })
    .await;
    // A real 640 × 480 photo-like PNG.
    let photo = image::RgbImage::from_fn(640, 480, |x, y| {
        image::Rgb([(x % 251) as u8, (y % 241) as u8, ((x * y) % 239) as u8])
    });
    let mut bytes = std::io::Cursor::new(Vec::new());
    photo
        .write_to(&mut bytes, image::ImageFormat::Png)
        .expect("encode");
    let bytes = bytes.into_inner();
    let stored = send(
        &mut stack.client,
        None,
        upload("photo.png", "thumbs", &bytes, 64 * 1024, 0),
    )
    .await
    .expect("stored");
    assert_eq!(stored.media_type, "image/png");

    // The model gets a 100-pixel JPEG of it...
    let turn = crate::harness::chat(
        &mut stack.client,
        message_with("", "What is this?", "thumbs", &[&stored.id]),
    )
    .await;
    assert!(turn.complete.success, "{:?}", turn.complete);
    let seen = turn.text.clone();
    assert!(
        seen.starts_with("photo.png (image/jpeg, "),
        "downscaled and encoded again: {seen}"
    );
    let sent: usize = seen["photo.png (image/jpeg, ".len()..]
        .split(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .expect("a size");
    assert!(sent < bytes.len() / 10, "{sent} bytes of {}", bytes.len());

    // ...and the stored original is untouched.
    let (metadata, back, _) = download(
        &mut stack.client,
        tonic::Request::new(gw::DownloadAttachmentRequest {
            attachment_id: stored.id.clone(),
        }),
    )
    .await
    .expect("download");
    assert_eq!(metadata.media_type, "image/png");
    assert_eq!(
        format!("{:x}", Sha256::digest(&back)),
        format!("{:x}", Sha256::digest(&bytes))
    );
    stack.stop().await;
}

#[tokio::test]
async fn a_small_file_sent_inline_is_stored_typed_and_reaches_the_model() {
    let dir = tempfile::tempdir().expect("dir");
    let runner_url = crate::real_stack::real_runner_with(echoing_runner(dir.path())).await;
    let mut stack = Harness::start(Options {
        runner_url: Some(runner_url),
        registry: Some(
            chat_gateway::registry::Registry::from_str(
                "version: 1\npages:\n  files:\n    attachments: [image/*, text/csv]\n    model: vision\n",
                "files.yaml",
            )
            .expect("a valid registry"),
        ),
        ..Options::default()
    })
    .await;
    let inline = |name: &str, data: &[u8]| gw::AttachmentRef {
        id: String::new(),
        inline: Some(gw::InlineAttachment {
            name: name.into(),
            data: data.to_vec(),
        }),
    };
    let csv = b"month,total\njan,10\n";
    let digest = format!("{:x}", Sha256::digest(csv));

    // Stored as an upload would be, and given to the model.
    let mut request = crate::harness::chat_request("", "Sum it", "files");
    request.attachments = vec![inline("sales.csv", csv)];
    let turn = crate::harness::chat(&mut stack.client, request).await;
    assert!(turn.complete.success, "{:?}", turn.complete);
    assert_eq!(
        turn.text,
        format!("sales.csv (text/csv, 19 bytes, sha256 {})", &digest[..12])
    );
    let read = stack
        .client
        .get_conversation(gw::GetConversationRequest {
            conversation_id: turn.conversation_id(),
            ..Default::default()
        })
        .await
        .expect("get")
        .into_inner();
    let attached = &read.messages[0].attachments;
    assert_eq!(attached.len(), 1);
    assert_eq!(attached[0].media_type, "text/csv");
    assert_eq!(attached[0].sha256, digest);
    let (_, back, _) = download(
        &mut stack.client,
        tonic::Request::new(gw::DownloadAttachmentRequest {
            attachment_id: attached[0].id.clone(),
        }),
    )
    .await
    .expect("download");
    assert_eq!(back, csv);

    // Its bytes decide its type, as for an upload.
    let mut zip = crate::harness::chat_request("", "Open it", "files");
    zip.attachments = vec![inline("photo.png", b"PK\x03\x04\x14\0\0\0rest")];
    let refused = stack.client.chat(zip).await.expect_err("a ZIP");
    assert_eq!(reason(&refused), "ATTACHMENT_TYPE_NOT_ALLOWED");

    // Inline files are small: past attachments.max_inline_bytes, upload.
    let mut big = crate::harness::chat_request("", "Look", "files");
    big.attachments = vec![inline("big.csv", &vec![b'a'; 1024 * 1024 + 1])];
    let refused = stack.client.chat(big).await.expect_err("too large");
    assert_eq!(reason(&refused), "ATTACHMENT_TOO_LARGE");
    assert!(
        refused.message().contains("attachments.max_inline_bytes"),
        "{}",
        refused.message()
    );

    // An id and bytes at once is one too many.
    let mut both = crate::harness::chat_request("", "Look", "files");
    let mut twice = inline("a.csv", csv);
    twice.id = "att_0123456789abcdef0123456789abcdef".into();
    both.attachments = vec![twice];
    let refused = stack.client.chat(both).await.expect_err("both");
    assert_eq!(reason(&refused), "INVALID_ATTACHMENT");
    // Nothing of the refused ones was kept.
    assert_eq!(left_behind(&stack).await, (0, 1));

    // A retried request (the same request_id) joins its turn: its inline
    // file is not stored a second time.
    let mut first = crate::harness::chat_request("", "Sum it again", "files");
    first.request_id = "req-inline-1".into();
    first.attachments = vec![inline("again.csv", csv)];
    let turn = crate::harness::chat(&mut stack.client, first.clone()).await;
    assert!(turn.complete.success, "{:?}", turn.complete);
    assert_eq!(left_behind(&stack).await, (0, 2));
    let retried = crate::harness::chat(&mut stack.client, first).await;
    assert_eq!(retried.complete.turn_id, turn.complete.turn_id);
    assert_eq!(left_behind(&stack).await, (0, 2), "stored once");
    stack.stop().await;
}

#[tokio::test]
async fn an_upload_onto_a_full_disk_is_refused_leaves_nothing_readable_and_is_swept() {
    use crate::harness::process::{GatewayProcess, ProcessConfig};
    const TEST: &str =
        "attachments::an_upload_onto_a_full_disk_is_refused_leaves_nothing_readable_and_is_swept";
    // Room for the migrated database and little more: a 3 MiB file does
    // not fit (the turns' full-disk test sizes it the same way).
    let disk = match crate::durable::Tmpfs::mount("832k") {
        Ok(disk) => disk,
        Err(why) => return parley_testkit::not_run(TEST, &why),
    };
    let options = Options::default();
    let (_runner, runner_addr, parser_addr, _parser) =
        crate::harness::start_upstreams(&options).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let registry = dir.path().join("files.yaml");
    std::fs::write(
        &registry,
        "version: 1\npages:\n  files:\n    attachments: [image/*]\n",
    )
    .expect("write the registry");
    let registry = registry.display().to_string();
    let env = [
        ("PARLEY_REGISTRY", registry.as_str()),
        ("PARLEY_ATTACHMENTS__UPLOAD_TIMEOUT", "1s"),
    ];
    let database_url = format!(
        "sqlite://{}?mode=rwc",
        disk.dir.path().join("g.db").display()
    );
    let config = ProcessConfig {
        database_url: database_url.clone(),
        runner: runner_addr,
        parser: parser_addr,
        lease_renew: std::time::Duration::from_secs(2),
        lease_ttl: std::time::Duration::from_secs(10),
        stream_ahead: 32,
        per_user_concurrent_turns: 0,
    };
    let mut gateway = GatewayProcess::start_with(&config, dir.path(), "full", None, &env).await;
    let bytes = png(3 * 1024 * 1024);
    let refused = send(
        &mut gateway.client,
        None,
        upload("big.png", "files", &bytes, 64 * 1024, 0),
    )
    .await
    .expect_err("the disk is full");
    assert_eq!(refused.code(), Code::Unavailable, "{refused:?}");
    assert_eq!(reason(&refused), "STORE_UNAVAILABLE", "{refused:?}");

    // Room again, and past twice the upload time-out: the next gateway's
    // sweep (at its start) deletes whatever the refused upload left.
    gateway.kill().await;
    disk.resize("32m");
    tokio::time::sleep(std::time::Duration::from_millis(2_500)).await;
    let mut gateway = GatewayProcess::start_with(&config, dir.path(), "freed", None, &env).await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let left = Bytes::Db.left_at(&database_url).await;
        if left == (0, 0) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the refused upload was not swept: {left:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    // And a file fits now, whole.
    let stored = send(
        &mut gateway.client,
        None,
        upload("big.png", "files", &bytes, 64 * 1024, 0),
    )
    .await
    .expect("stored");
    assert_eq!(stored.sha256, format!("{:x}", Sha256::digest(&bytes)));
    gateway.kill().await;
}
