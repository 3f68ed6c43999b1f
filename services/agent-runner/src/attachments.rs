//! The files of a turn's user messages against what its models take.
//!
//! The primary model decides: a file of a kind it does not take (an image
//! for a text-only model) fails the turn before any call
//! (`ATTACHMENT_UNSUPPORTED`), or, when the request asks for it
//! (`describe_unsupported_attachments`), is replaced by a line naming it,
//! its type and its size. A fallback that cannot take what remains is left
//! out of the turn's candidates, so a failover never sends a file to a
//! model that refuses it.

pub mod images;

use std::{collections::BTreeSet, sync::Arc};

use crate::{
    error::RunError,
    provider::{Attachment, Message, ModelChoice, Providers},
    routes::{ImageLimits, InputKind, Routes},
    turn::Turn,
};

/// Fits `turn`'s files to its models (see the module documentation), and
/// records what each candidate takes ([`Turn::inputs`]) for the files its
/// tools will return.
pub fn fit(
    turn: &mut Turn,
    routes: &Routes,
    providers: &Providers,
    describe: bool,
) -> Result<(), RunError> {
    user_files(turn, routes, describe)?;
    let candidates = || std::iter::once(&turn.model).chain(&turn.fallbacks);
    turn.inputs = candidates()
        .map(|model| routes.input_of(model).to_vec())
        .collect();
    turn.image_limits = candidates()
        .map(|model| {
            let api = providers
                .get(&model.provider)
                .map_or(ImageLimits::NONE, |provider| provider.image_limits());
            routes.image_limits_of(model, api)
        })
        .fold(ImageLimits::NONE, ImageLimits::stricter);
    Ok(())
}

/// The messages for the candidate that takes `takes`: the same, unless a
/// tool result carries a file of a kind it does not take, which is then
/// left out (the result's text names it).
pub fn for_candidate(messages: &Arc<[Message]>, takes: &[InputKind]) -> Arc<[Message]> {
    let refused = |file: &Arc<Attachment>| !takes.contains(&file.kind());
    let any_refused = messages.iter().any(|message| {
        matches!(message, Message::ToolResults(results)
            if results.iter().any(|result| result.attachments.iter().any(refused)))
    });
    if !any_refused {
        return messages.clone();
    }
    messages
        .iter()
        .map(|message| match message {
            Message::ToolResults(results) => Message::ToolResults(
                results
                    .iter()
                    .map(|result| {
                        let mut result = result.clone();
                        result.attachments.retain(|file| !refused(file));
                        result
                    })
                    .collect(),
            ),
            other => other.clone(),
        })
        .collect()
}

fn user_files(turn: &mut Turn, routes: &Routes, describe: bool) -> Result<(), RunError> {
    if !turn.messages.iter().any(
        |message| matches!(message, Message::User { attachments, .. } if !attachments.is_empty()),
    ) {
        return Ok(());
    }
    let takes = routes.input_of(&turn.model).to_vec();
    let mut kinds = BTreeSet::new();
    for message in &mut turn.messages {
        let Message::User { text, attachments } = message else {
            continue;
        };
        let mut described = Vec::new();
        for file in std::mem::take(attachments) {
            let kind = file.kind();
            if takes.contains(&kind) {
                kinds.insert(kind.as_str());
                attachments.push(file);
            } else if describe {
                described.push(file.described());
            } else {
                return Err(unsupported(&turn.model, kind, &file.media_type));
            }
        }
        if !described.is_empty() {
            let lines = described.join("\n");
            *text = if text.is_empty() {
                lines
            } else {
                format!("{text}\n\n{lines}")
            };
        }
    }
    turn.fallbacks.retain(|fallback| {
        let input = routes.input_of(fallback);
        let fits = kinds
            .iter()
            .all(|kind| input.iter().any(|taken| taken.as_str() == *kind));
        if !fits {
            tracing::info!(provider = %fallback.provider, model = %fallback.model, "a fallback that does not take the turn's files is left out");
        }
        fits
    });
    Ok(())
}

fn unsupported(model: &ModelChoice, kind: InputKind, media_type: &str) -> RunError {
    RunError::AttachmentUnsupported {
        provider: model.provider.clone(),
        model: model.model.clone(),
        kind: kind.as_str(),
        media_type: media_type.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::{provider::ToolResult, routes::RouteConfig};

    fn file(name: &str, media_type: &str) -> Arc<Attachment> {
        Arc::new(Attachment {
            name: name.into(),
            media_type: media_type.into(),
            data: vec![1, 2, 3],
        })
    }

    fn choice(provider: &str, model: &str) -> ModelChoice {
        ModelChoice {
            provider: provider.into(),
            model: model.into(),
            params: Default::default(),
        }
    }

    fn providers() -> Providers {
        Providers::single(
            "scripted",
            Arc::new(crate::provider::scripted::ScriptedProvider::new(
                "scripted",
                crate::provider::scripted::Script::from_toml("model = \"m\"").expect("script"),
            )),
            "m",
        )
    }

    /// Routes where `scripted/text-only` takes text alone.
    fn routes() -> Routes {
        let providers = providers();
        Routes::from_config(
            &BTreeMap::from([(
                "plain".to_owned(),
                RouteConfig {
                    primary: "scripted/text-only".into(),
                    fallbacks: Vec::new(),
                    context_window: None,
                    max_output_tokens: None,
                    input: vec![InputKind::Text],
                    prices: None,
                    max_image_bytes: None,
                    max_image_edge: None,
                },
            )]),
            &providers,
        )
        .expect("routes")
    }

    fn turn(model: ModelChoice, fallbacks: Vec<ModelChoice>) -> Turn {
        let mut turn = crate::convert::request::turn_from_request(
            parley_proto::runner::v1::RunRequest {
                messages: vec![parley_proto::runner::v1::Message {
                    role: parley_proto::runner::v1::Role::User as i32,
                    text: "look".into(),
                    ..Default::default()
                }],
                ..Default::default()
            },
            &crate::turn::Limits::default(),
            None,
        )
        .expect("a valid request");
        turn.model = model;
        turn.fallbacks = fallbacks;
        turn.messages = vec![Message::User {
            text: "look".into(),
            attachments: vec![file("a.png", "image/png"), file("b.csv", "text/csv")],
        }];
        turn
    }

    #[test]
    fn a_model_that_takes_no_images_refuses_or_gets_them_described() {
        let routes = routes();
        let mut refused = turn(choice("scripted", "text-only"), Vec::new());
        let error = fit(&mut refused, &routes, &providers(), false).expect_err("no images");
        assert!(
            matches!(&error, RunError::AttachmentUnsupported { kind: "image", media_type, .. } if media_type == "image/png"),
            "{error:?}"
        );

        let mut described = turn(choice("scripted", "text-only"), Vec::new());
        fit(&mut described, &routes, &providers(), true).expect("described");
        let Message::User { text, attachments } = &described.messages[0] else {
            panic!("a user message");
        };
        assert_eq!(attachments.len(), 1, "the CSV stays");
        assert_eq!(
            text,
            "look\n\n[file a.png, image/png, 3 bytes, not shown to this model]"
        );
    }

    #[test]
    fn a_tools_image_goes_only_to_candidates_that_take_images() {
        let routes = routes();
        let mut turn = turn(
            choice("scripted", "text-only"),
            vec![choice("scripted", "vision")],
        );
        turn.messages = vec![Message::user("chart it")];
        fit(&mut turn, &routes, &providers(), false).expect("no user files");
        assert_eq!(
            turn.inputs,
            vec![vec![InputKind::Text], InputKind::ALL.to_vec()]
        );
        let messages: Arc<[Message]> = vec![
            Message::user("chart it"),
            Message::ToolResults(vec![ToolResult {
                call_id: "c1".into(),
                name: "chart".into(),
                text: "[image chart-1.png, image/png, 3 bytes, shown to the user]".into(),
                is_error: false,
                attachments: vec![
                    file("chart-1.png", "image/png"),
                    file("d.pdf", "application/pdf"),
                ],
            }]),
        ]
        .into();
        let seen = |messages: &Arc<[Message]>| match &messages[1] {
            Message::ToolResults(results) => results[0]
                .attachments
                .iter()
                .map(|file| file.name.clone())
                .collect::<Vec<_>>(),
            _ => panic!("tool results"),
        };
        let text_only = for_candidate(&messages, &turn.inputs[0]);
        assert!(seen(&text_only).is_empty());
        let vision = for_candidate(&messages, &turn.inputs[1]);
        assert!(
            Arc::ptr_eq(&vision, &messages),
            "nothing to leave out: the same messages"
        );
        assert_eq!(seen(&vision), ["chart-1.png", "d.pdf"]);
        let images = for_candidate(&messages, &[InputKind::Text, InputKind::Image]);
        assert_eq!(seen(&images), ["chart-1.png"]);
    }

    #[test]
    fn fallbacks_that_cannot_take_the_files_are_left_out() {
        let routes = routes();
        let mut any = turn(
            choice("scripted", "vision"),
            vec![choice("scripted", "text-only"), choice("scripted", "other")],
        );
        fit(&mut any, &routes, &providers(), false).expect("the primary takes images");
        let kept: Vec<&str> = any.fallbacks.iter().map(|f| f.model.as_str()).collect();
        assert_eq!(kept, ["other"]);
    }
}
