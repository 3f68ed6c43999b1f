//! Images over what a turn's models take, downscaled before the call.
//!
//! Each provider refuses images past its limits (Anthropic: 5 MB or 8 000
//! pixels a side; OpenAI: 20 MB; Gemini: 7 MB inline), and a route may set
//! stricter ones (`max_image_bytes`, `max_image_edge`). A turn's images,
//! the user's and the ones its tools return, are checked against the
//! strictest of its candidates ([`crate::turn::Turn::image_limits`]): the
//! size first, then the dimensions read from the header alone; only an
//! image over a limit is decoded, scaled to fit the longer side, and
//! encoded again (PNG when it has transparency, else JPEG), smaller each
//! try until it fits. The gateway keeps the original: only what the model
//! is sent changes.
//!
//! Decoding is bounded ([`DECODE_MAX_ALLOC`], [`DECODE_MAX_EDGE`]) so that
//! a small file that claims huge dimensions cannot take the runner's
//! memory, and it runs on the blocking pool, off the turns' threads.

use std::{io::Cursor, sync::Arc};

use image::{DynamicImage, ImageFormat, ImageReader, imageops::FilterType};

use crate::provider::{Attachment, ImageLimits, InputKind, Message, ToolResult};

/// The most memory one decode may allocate.
pub const DECODE_MAX_ALLOC: u64 = 512 * 1024 * 1024;

/// The most pixels a side of an image that is decoded may have.
pub const DECODE_MAX_EDGE: u32 = 16_384;

/// JPEG quality of a downscaled image.
const JPEG_QUALITY: u8 = 85;

/// How many smaller sizes are tried before giving up on the byte limit.
const MAX_TRIES: usize = 6;

/// Why an image could not be made to fit.
#[derive(Debug, thiserror::Error)]
pub enum DownscaleError {
    /// Its bytes are not an image this runner decodes (PNG, JPEG, GIF,
    /// WebP), or are damaged, or exceed the decode bounds.
    #[error("it could not be decoded ({0})")]
    Decode(String),
    /// Even much smaller it stays over the byte limit.
    #[error("it stays over {max} bytes even at {edge} pixels a side")]
    StillTooLarge {
        /// The byte limit.
        max: u64,
        /// The smallest longer side tried.
        edge: u32,
    },
}

/// `file` made to fit `limits`: `None` when it already does (or is not an
/// image), else the downscaled copy under the same name.
pub fn fit_image(
    file: &Attachment,
    limits: ImageLimits,
) -> Result<Option<Attachment>, DownscaleError> {
    if file.kind() != InputKind::Image || limits == ImageLimits::NONE {
        return Ok(None);
    }
    let bytes = file.data.len() as u64;
    let edge = match reader(&file.data)?.into_dimensions() {
        Ok((width, height)) => width.max(height),
        // An image whose header cannot be read is sent as it is when its
        // size fits: the provider decides.
        Err(_) if limits.max_bytes.is_none_or(|max| bytes <= max) => return Ok(None),
        Err(error) => return Err(DownscaleError::Decode(error.to_string())),
    };
    if limits.fits(bytes, edge) {
        return Ok(None);
    }
    let mut reader = reader(&file.data)?;
    let mut bounds = image::Limits::default();
    bounds.max_alloc = Some(DECODE_MAX_ALLOC);
    bounds.max_image_width = Some(DECODE_MAX_EDGE);
    bounds.max_image_height = Some(DECODE_MAX_EDGE);
    reader.limits(bounds);
    let image = reader
        .decode()
        .map_err(|error| DownscaleError::Decode(error.to_string()))?;
    let mut target = limits.max_edge.map_or(edge, |max| max.min(edge));
    for _ in 0..MAX_TRIES {
        let scaled = if target < edge {
            image.resize(target, target, FilterType::Triangle)
        } else {
            image.clone()
        };
        let (data, media_type) = encode(&scaled)?;
        let size = data.len() as u64;
        match limits.max_bytes {
            Some(max) if size > max => {
                // Bytes go with the area: shrink the side by the square
                // root of the excess, and a little more.
                let ratio = (max as f64 / size as f64).sqrt() * 0.9;
                let next = (f64::from(target) * ratio).floor() as u32;
                target = next.clamp(1, target.saturating_sub(1).max(1));
            }
            _ => {
                tracing::info!(
                    name = %file.name,
                    from_bytes = bytes,
                    to_bytes = size,
                    from_edge = edge,
                    to_edge = scaled.width().max(scaled.height()),
                    "an image over the model's limits was downscaled"
                );
                return Ok(Some(Attachment {
                    name: file.name.clone(),
                    media_type: media_type.to_owned(),
                    data,
                }));
            }
        }
    }
    Err(DownscaleError::StillTooLarge {
        max: limits.max_bytes.unwrap_or(u64::MAX),
        edge: target,
    })
}

fn reader(data: &[u8]) -> Result<ImageReader<Cursor<&[u8]>>, DownscaleError> {
    ImageReader::new(Cursor::new(data))
        .with_guessed_format()
        .map_err(|error| DownscaleError::Decode(error.to_string()))
}

/// PNG for an image with transparency (JPEG has none), else JPEG.
fn encode(image: &DynamicImage) -> Result<(Vec<u8>, &'static str), DownscaleError> {
    let mut out = Cursor::new(Vec::new());
    let media_type = if image.color().has_alpha() {
        image
            .write_to(&mut out, ImageFormat::Png)
            .map_err(|error| DownscaleError::Decode(error.to_string()))?;
        "image/png"
    } else {
        let rgb = DynamicImage::ImageRgb8(image.to_rgb8());
        let encoder = image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, JPEG_QUALITY);
        rgb.write_with_encoder(encoder)
            .map_err(|error| DownscaleError::Decode(error.to_string()))?;
        "image/jpeg"
    };
    Ok((out.into_inner(), media_type))
}

/// Fits every image of `files` to `limits`, on the blocking pool; an image
/// that cannot fit is taken out and returned with why, for the caller to
/// name it to the model.
pub async fn fit_all(
    files: &mut Vec<Arc<Attachment>>,
    limits: ImageLimits,
) -> Vec<(Arc<Attachment>, DownscaleError)> {
    let mut refused = Vec::new();
    if limits == ImageLimits::NONE {
        return refused;
    }
    let mut kept = Vec::with_capacity(files.len());
    for file in files.drain(..) {
        let small = limits.max_edge.is_none() && limits.fits(file.data.len() as u64, 0);
        if file.kind() != InputKind::Image || small {
            kept.push(file);
            continue;
        }
        let original = file.clone();
        let fitted = match tokio::task::spawn_blocking(move || fit_image(&original, limits)).await {
            Ok(fitted) => fitted,
            Err(error) => Err(DownscaleError::Decode(format!(
                "the decoder stopped: {error}"
            ))),
        };
        match fitted {
            Ok(None) => kept.push(file),
            Ok(Some(fitted)) => kept.push(Arc::new(fitted)),
            Err(error) => {
                tracing::warn!(name = %file.name, media_type = %file.media_type, bytes = file.data.len(), %error, "an image over the model's limits could not be downscaled; it is left out");
                refused.push((file, error));
            }
        }
    }
    *files = kept;
    refused
}

/// Fits the images of `messages`, the users' and the tools' (see
/// [`fit_all`]): a user's image that cannot fit is replaced by a line
/// naming it; a tool's is left out (the result's text names it).
pub async fn fit_messages(messages: &mut [Message], limits: ImageLimits) {
    if limits == ImageLimits::NONE {
        return;
    }
    for message in messages {
        match message {
            Message::User { text, attachments } => {
                let lines: Vec<String> = fit_all(attachments, limits)
                    .await
                    .into_iter()
                    .map(|(file, error)| {
                        format!(
                            "[file {}, {}, {} bytes, over the model's image limits ({error}), not shown to this model]",
                            file.name,
                            file.media_type,
                            file.data.len()
                        )
                    })
                    .collect();
                if !lines.is_empty() {
                    let lines = lines.join("\n");
                    *text = if text.is_empty() {
                        lines
                    } else {
                        format!("{text}\n\n{lines}")
                    };
                }
            }
            Message::ToolResults(results) => fit_results(results, limits).await,
            Message::Assistant { .. } => {}
        }
    }
}

/// Fits the images tool calls returned (see [`fit_all`]).
pub async fn fit_results(results: &mut [ToolResult], limits: ImageLimits) {
    for result in results {
        if !result.attachments.is_empty() {
            fit_all(&mut result.attachments, limits).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn png(width: u32, height: u32, alpha: bool) -> Attachment {
        let image = if alpha {
            DynamicImage::ImageRgba8(image::RgbaImage::from_fn(width, height, |x, y| {
                image::Rgba([(x % 256) as u8, (y % 256) as u8, 7, 128])
            }))
        } else {
            DynamicImage::ImageRgb8(image::RgbImage::from_fn(width, height, |x, y| {
                image::Rgb([
                    (x * 7 % 256) as u8,
                    (y * 13 % 256) as u8,
                    ((x ^ y) % 256) as u8,
                ])
            }))
        };
        let mut out = Cursor::new(Vec::new());
        image.write_to(&mut out, ImageFormat::Png).expect("encode");
        Attachment {
            name: "shot.png".into(),
            media_type: "image/png".into(),
            data: out.into_inner(),
        }
    }

    fn dimensions(file: &Attachment) -> (u32, u32) {
        reader(&file.data)
            .expect("reader")
            .into_dimensions()
            .expect("dimensions")
    }

    #[test]
    fn an_image_within_the_limits_is_sent_as_it_is() {
        let file = png(300, 200, false);
        let limits = ImageLimits {
            max_bytes: Some(10_000_000),
            max_edge: Some(300),
        };
        assert!(fit_image(&file, limits).expect("fits").is_none());
        assert!(
            fit_image(&file, ImageLimits::NONE)
                .expect("no limits")
                .is_none()
        );
    }

    #[test]
    fn a_wide_image_is_scaled_to_the_edge_keeping_its_shape() {
        let file = png(1200, 600, false);
        let limits = ImageLimits {
            max_bytes: None,
            max_edge: Some(400),
        };
        let fitted = fit_image(&file, limits).expect("fits").expect("downscaled");
        assert_eq!(dimensions(&fitted), (400, 200));
        assert_eq!(fitted.media_type, "image/jpeg");
        assert_eq!(fitted.name, "shot.png");
    }

    #[test]
    fn a_heavy_image_shrinks_until_under_the_byte_limit_and_keeps_its_transparency() {
        let file = png(800, 800, true);
        let max = file.data.len() as u64 / 5;
        let limits = ImageLimits {
            max_bytes: Some(max),
            max_edge: None,
        };
        let fitted = fit_image(&file, limits).expect("fits").expect("downscaled");
        assert!(
            fitted.data.len() as u64 <= max,
            "{} > {max}",
            fitted.data.len()
        );
        assert_eq!(fitted.media_type, "image/png", "transparency needs PNG");
        let (width, height) = dimensions(&fitted);
        assert_eq!(width, height);
        assert!(width < 800);
    }

    #[test]
    fn bytes_that_are_no_image_are_refused_only_when_over_the_limit() {
        let file = Attachment {
            name: "fake.png".into(),
            media_type: "image/png".into(),
            data: vec![0x42; 2_000],
        };
        let roomy = ImageLimits {
            max_bytes: Some(10_000),
            max_edge: Some(100),
        };
        assert!(
            fit_image(&file, roomy)
                .expect("the provider decides")
                .is_none()
        );
        let tight = ImageLimits {
            max_bytes: Some(1_000),
            max_edge: None,
        };
        assert!(matches!(
            fit_image(&file, tight),
            Err(DownscaleError::Decode(_))
        ));
    }

    #[test]
    fn a_header_claiming_huge_dimensions_is_not_decoded() {
        // A real small PNG whose header says 100 000 × 100 000 pixels.
        let mut file = png(4, 4, false);
        file.data[16..20].copy_from_slice(&100_000u32.to_be_bytes());
        file.data[20..24].copy_from_slice(&100_000u32.to_be_bytes());
        let crc = crc(&file.data[12..29]);
        file.data[29..33].copy_from_slice(&crc.to_be_bytes());
        assert_eq!(dimensions(&file), (100_000, 100_000));
        let limits = ImageLimits {
            max_bytes: None,
            max_edge: Some(1_000),
        };
        let outcome = fit_image(&file, limits);
        assert!(
            matches!(&outcome, Err(DownscaleError::Decode(_))),
            "{outcome:?}"
        );
    }

    /// The CRC-32 of a PNG chunk (type and data).
    fn crc(bytes: &[u8]) -> u32 {
        let mut crc = 0xFFFF_FFFFu32;
        for byte in bytes {
            crc ^= u32::from(*byte);
            for _ in 0..8 {
                crc = if crc & 1 == 1 {
                    (crc >> 1) ^ 0xEDB8_8320
                } else {
                    crc >> 1
                };
            }
        }
        !crc
    }
}
