//! Model routes: the `[models.NAME]` entries of the configuration. A route
//! is an alias that requests and the gateway's pages name (`smart`,
//! `cheap`), standing for a primary `provider/model` and the models tried
//! after it, in order, when it fails before answering (or, with mid-answer
//! failover, after): the failures retries are for (429, 5xx, a lost
//! connection), once the retries are spent.
//!
//! ```toml
//! [models.smart]
//! primary = "openai/gpt-4.1-mini"
//! fallbacks = ["anthropic/claude-sonnet-4-5", "gemini/gemini-2.5-flash"]
//! context_window = 1047576
//! max_output_tokens = 8192
//! input = ["text", "image", "pdf"]
//! prices = { input = 0.40, cached_input = 0.10, cache_write = 0.0, output = 1.60 }
//! ```
//!
//! A request names a route by its bare name (`ModelRef` without a
//! provider); the runner puts the route's primary in its place and the
//! route's fallbacks before the request's own. A route's models are the
//! operator's choice: they join the models `models.allowed` lets requests
//! name. Its prices (see [`crate::pricing`]) are those of its primary.

use std::collections::BTreeMap;

use parley_grpc::config::{ConfigError, invalid};
use serde::{Deserialize, Serialize};

use crate::{
    pricing::{PriceTable, Prices, PricesConfig},
    provider::{ModelChoice, Providers},
    turn::Turn,
};

/// Longest route name, in bytes.
pub const MAX_ROUTE_NAME: usize = 64;

pub use crate::provider::{ImageLimits, InputKind};

/// One `[models.NAME]` entry as written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteConfig {
    /// The model called first, `provider/model`.
    pub primary: String,
    /// The models tried next, in order, `provider/model` each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fallbacks: Vec<String>,
    /// The primary's context window, in tokens (prompt and answer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_window: Option<u64>,
    /// The output token limit of a turn on this route that sets none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u32>,
    /// What the primary takes as input; unset: what its provider's models
    /// take (text, images and PDFs for every known provider).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub input: Vec<InputKind>,
    /// The primary's prices per million tokens, in `[pricing] currency`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prices: Option<PricesConfig>,
    /// The most bytes of an image the primary takes; larger ones are
    /// downscaled. Unset: its provider's limit (Anthropic 5 MB, OpenAI 20
    /// MB, Gemini 7 MB; none for the scripted provider).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_image_bytes: Option<u64>,
    /// The most pixels of an image's longer side the primary takes; larger
    /// ones are downscaled. Unset: its provider's limit (Anthropic 8 000;
    /// none for the others, which scale large images themselves).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_image_edge: Option<u32>,
}

/// A route, its models resolved against the configured providers.
#[derive(Debug, Clone, PartialEq)]
pub struct Route {
    /// The model called first.
    pub primary: ModelChoice,
    /// The models tried next, in order.
    pub fallbacks: Vec<ModelChoice>,
    /// The primary's context window, in tokens, when configured.
    pub context_window: Option<u64>,
    /// The output token limit when the turn sets none.
    pub max_output_tokens: Option<u32>,
    /// What the primary takes as input (at least `text`), when configured.
    pub input: Option<Vec<InputKind>>,
    /// The primary's prices, when configured.
    pub prices: Option<Prices>,
    /// The largest image the primary takes, where configured (each
    /// measure left `None` is its provider's).
    pub images: ImageLimits,
}

/// Every configured route, by name.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Routes {
    routes: BTreeMap<String, Route>,
}

impl Routes {
    /// The routes of `config`, each model naming a configured provider.
    pub fn from_config(
        config: &BTreeMap<String, RouteConfig>,
        providers: &Providers,
    ) -> Result<Self, ConfigError> {
        let mut routes = BTreeMap::new();
        for (name, route) in config {
            let field = format!("models.{name}");
            if name.is_empty()
                || name.len() > MAX_ROUTE_NAME
                || !name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
            {
                return Err(invalid(
                    field,
                    format!(
                        "a route's name is 1 to {MAX_ROUTE_NAME} letters, digits, `-`, `_` or `.`"
                    ),
                ));
            }
            let model = |field: String, text: &str| {
                parse_model(text, providers).map_err(|problem| invalid(field, problem))
            };
            let primary = model(format!("{field}.primary"), &route.primary)?;
            let fallbacks = route
                .fallbacks
                .iter()
                .enumerate()
                .map(|(i, text)| model(format!("{field}.fallbacks[{i}]"), text))
                .collect::<Result<Vec<_>, _>>()?;
            if route.max_output_tokens == Some(0) {
                return Err(invalid(
                    format!("{field}.max_output_tokens"),
                    "must be at least 1",
                ));
            }
            if route.max_image_bytes == Some(0) {
                return Err(invalid(
                    format!("{field}.max_image_bytes"),
                    "must be at least 1",
                ));
            }
            if route.max_image_edge == Some(0) {
                return Err(invalid(
                    format!("{field}.max_image_edge"),
                    "must be at least 1",
                ));
            }
            if route.context_window == Some(0) {
                return Err(invalid(
                    format!("{field}.context_window"),
                    "must be at least 1",
                ));
            }
            let prices = route
                .prices
                .as_ref()
                .map(|prices| Prices::from_config(prices, &format!("{field}.prices")))
                .transpose()?;
            let input = (!route.input.is_empty()).then(|| {
                let mut input = vec![InputKind::Text];
                for kind in &route.input {
                    if !input.contains(kind) {
                        input.push(*kind);
                    }
                }
                input
            });
            routes.insert(
                name.clone(),
                Route {
                    primary,
                    fallbacks,
                    context_window: route.context_window,
                    max_output_tokens: route.max_output_tokens,
                    input,
                    prices,
                    images: ImageLimits {
                        max_bytes: route.max_image_bytes,
                        max_edge: route.max_image_edge,
                    },
                },
            );
        }
        Ok(Self { routes })
    }

    /// The route named `name`.
    pub fn get(&self, name: &str) -> Option<&Route> {
        self.routes.get(name)
    }

    /// The routes' names.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.routes.keys().map(String::as_str)
    }

    /// The prices of the routes' primaries, in `currency`: one model priced
    /// differently by two routes is an error. Warns of each routed model
    /// left without a price once any has one (its calls would cost 0).
    pub fn price_table(&self, currency: String) -> Result<PriceTable, ConfigError> {
        let table = PriceTable::new(
            currency,
            self.routes.iter().filter_map(|(name, route)| {
                let prices = route.prices?;
                let model = format!("{}/{}", route.primary.provider, route.primary.model);
                Some((model, prices, name.as_str()))
            }),
        )?;
        if !table.is_empty() {
            for model in self.models() {
                if table.get(model).is_none() {
                    tracing::warn!(model = %format!("{}/{}", model.provider, model.model), "a routed model has no price (no route with it as primary sets `prices`); its calls will cost 0");
                }
            }
        }
        Ok(table)
    }

    /// What `model` takes as input: the `input` of the route whose primary
    /// it is, else [`InputKind::ALL`] (every known provider's models take
    /// text, images and PDFs; a route says otherwise for one that does not).
    pub fn input_of(&self, model: &ModelChoice) -> &[InputKind] {
        self.routes
            .values()
            .filter(|route| {
                route.primary.provider == model.provider && route.primary.model == model.model
            })
            .find_map(|route| route.input.as_deref())
            .unwrap_or(&InputKind::ALL)
    }

    /// The context window of `model`, when a route whose primary it is
    /// sets one.
    pub fn context_window_of(&self, model: &ModelChoice) -> Option<u64> {
        self.routes
            .values()
            .filter(|route| {
                route.primary.provider == model.provider && route.primary.model == model.model
            })
            .find_map(|route| route.context_window)
    }

    /// The context window of each of a turn's candidates (`candidates`,
    /// the primary first, as called): the route's `context_window` for the
    /// model a route calls first, else its
    /// [`crate::context::default_window`]; `None` where neither is known.
    pub fn windows<'a>(
        &self,
        candidates: impl Iterator<Item = &'a ModelChoice>,
        providers: &crate::provider::Providers,
    ) -> Vec<Option<crate::context::Window>> {
        use crate::context::{Counter, Window, default_window};
        candidates
            .map(|model| {
                let system = providers
                    .get(&model.provider)
                    .map_or("", |provider| provider.system());
                let tokens = self
                    .context_window_of(model)
                    .or_else(|| default_window(system, &model.model))?;
                Some(Window {
                    model: std::sync::Arc::from(model.model.as_str()),
                    tokens,
                    counter: Counter::of(system, &model.model),
                })
            })
            .collect()
    }

    /// The largest image `model` takes: what the route whose primary it is
    /// sets, each measure it leaves unset from `provider` (the API's own
    /// limits).
    pub fn image_limits_of(&self, model: &ModelChoice, provider: ImageLimits) -> ImageLimits {
        let configured = self
            .routes
            .values()
            .find(|route| {
                route.primary.provider == model.provider && route.primary.model == model.model
            })
            .map_or(ImageLimits::NONE, |route| route.images);
        ImageLimits {
            max_bytes: configured.max_bytes.or(provider.max_bytes),
            max_edge: configured.max_edge.or(provider.max_edge),
        }
    }

    /// Every model a route may call, for the allow list.
    pub fn models(&self) -> impl Iterator<Item = &ModelChoice> {
        self.routes
            .values()
            .flat_map(|route| std::iter::once(&route.primary).chain(&route.fallbacks))
    }

    /// Puts the route a turn's model names (a bare name, no provider) in
    /// its place: the route's primary (with the request's sampling
    /// parameters), its fallbacks before the request's own, its output
    /// limit when the turn sets none. Returns the route's name; `None`
    /// (the turn unchanged) when the model names no route.
    pub fn expand(&self, turn: &mut Turn) -> Option<String> {
        if !turn.model.provider.is_empty() {
            return None;
        }
        let (name, route) = self.routes.get_key_value(&turn.model.model)?;
        let params = std::mem::take(&mut turn.model.params);
        turn.model = ModelChoice {
            params,
            ..route.primary.clone()
        };
        let requested = std::mem::take(&mut turn.fallbacks);
        turn.fallbacks = route.fallbacks.iter().cloned().chain(requested).collect();
        if turn.limits.max_output_tokens.is_none() {
            turn.limits.max_output_tokens = route.max_output_tokens;
        }
        Some(name.clone())
    }
}

/// `provider/model`, the provider configured.
fn parse_model(text: &str, providers: &Providers) -> Result<ModelChoice, String> {
    let Some((provider, model)) = text.split_once('/') else {
        return Err(format!("`{text}` must be PROVIDER/MODEL"));
    };
    if model.is_empty() {
        return Err(format!("`{text}` names no model"));
    }
    if providers.get(provider).is_none() {
        let configured: Vec<&str> = providers.names().collect();
        return Err(format!(
            "`{text}`: no provider `{provider}` is configured ({})",
            configured.join(", ")
        ));
    }
    Ok(ModelChoice {
        provider: provider.to_owned(),
        model: model.to_owned(),
        params: Default::default(),
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use parley_proto::runner::v1 as pb;

    use super::*;
    use crate::provider::scripted::{Script, ScriptedProvider};

    /// A turn whose model is `model` (no provider).
    fn turn(model: &str) -> Turn {
        crate::convert::request::turn_from_request(
            pb::RunRequest {
                messages: vec![pb::Message {
                    role: pb::Role::User as i32,
                    text: "hi".into(),
                    ..Default::default()
                }],
                model: Some(pb::ModelRef {
                    model: model.into(),
                    ..Default::default()
                }),
                ..Default::default()
            },
            &crate::turn::Limits::default(),
            None,
        )
        .expect("a valid request")
    }

    fn providers() -> Providers {
        let script = || {
            Arc::new(ScriptedProvider::new(
                "p",
                Script::from_toml("model = \"m\"").expect("script"),
            ))
        };
        let entries = BTreeMap::from([
            (
                "openai".to_owned(),
                crate::provider::ProviderEntry {
                    provider: script(),
                    default_model: "gpt".into(),
                },
            ),
            (
                "anthropic".to_owned(),
                crate::provider::ProviderEntry {
                    provider: script(),
                    default_model: "claude".into(),
                },
            ),
        ]);
        Providers::new(entries, "openai").expect("providers")
    }

    fn route(primary: &str, fallbacks: &[&str]) -> RouteConfig {
        RouteConfig {
            primary: primary.into(),
            fallbacks: fallbacks.iter().map(|f| (*f).to_owned()).collect(),
            context_window: None,
            max_output_tokens: Some(8192),
            input: Vec::new(),
            prices: None,
            max_image_bytes: None,
            max_image_edge: None,
        }
    }

    #[test]
    fn a_bare_name_becomes_its_route() {
        let routes = Routes::from_config(
            &BTreeMap::from([(
                "smart".to_owned(),
                route("openai/gpt-4.1-mini", &["anthropic/claude-sonnet-4-5"]),
            )]),
            &providers(),
        )
        .expect("valid");
        let mut smart = turn("smart");
        smart.model.params.temperature = Some(0.5);
        smart.fallbacks = vec![ModelChoice {
            provider: "openai".into(),
            model: "gpt-4.1".into(),
            params: Default::default(),
        }];
        assert_eq!(routes.expand(&mut smart).as_deref(), Some("smart"));
        assert_eq!(
            (smart.model.provider.as_str(), smart.model.model.as_str()),
            ("openai", "gpt-4.1-mini")
        );
        assert_eq!(smart.model.params.temperature, Some(0.5));
        let fallbacks: Vec<&str> = smart.fallbacks.iter().map(|f| f.model.as_str()).collect();
        assert_eq!(fallbacks, ["claude-sonnet-4-5", "gpt-4.1"]);
        assert_eq!(smart.limits.max_output_tokens, Some(8192));
        assert_eq!(routes.models().count(), 2);

        // A model with a provider, or no route's name, stays as it is.
        let mut direct = turn("gpt-4.1");
        assert_eq!(routes.expand(&mut direct), None);
        assert_eq!(direct.model.model, "gpt-4.1");
        let mut named = turn("smart");
        named.model.provider = "openai".into();
        assert_eq!(routes.expand(&mut named), None);
    }

    #[test]
    fn routes_name_configured_providers_and_models() {
        let providers = providers();
        for (name, config, field) in [
            ("smart", route("openai", &[]), "models.smart.primary"),
            ("smart", route("gemini/flash", &[]), "models.smart.primary"),
            (
                "smart",
                route("openai/gpt", &["anthropic/"]),
                "models.smart.fallbacks[0]",
            ),
            ("has/slash", route("openai/gpt", &[]), "models.has/slash"),
        ] {
            let error =
                Routes::from_config(&BTreeMap::from([(name.to_owned(), config)]), &providers)
                    .expect_err(field);
            assert!(error.to_string().contains(field), "{error}");
        }
    }

    #[test]
    fn a_routes_prices_input_and_window_are_its_primarys() {
        let config: crate::allow::ModelsConfig = toml::from_str(
            "[smart]\nprimary = \"openai/gpt-4.1-mini\"\nfallbacks = [\"anthropic/claude\"]\n\
             context_window = 1047576\ninput = [\"image\", \"pdf\", \"image\"]\n\
             prices = { input = 0.40, cached_input = 0.10, output = 1.60 }\n\
             [claude]\nprimary = \"anthropic/claude\"\nprices = { input = 3.0, output = 15.0 }\n",
        )
        .expect("parses");
        let routes = Routes::from_config(&config.routes, &providers()).expect("valid");
        let smart = routes.get("smart").expect("smart");
        assert_eq!(smart.context_window, Some(1_047_576));
        assert_eq!(
            smart.input.as_deref(),
            Some(&[InputKind::Text, InputKind::Image, InputKind::Pdf][..])
        );
        assert_eq!(routes.get("claude").expect("claude").input, None);
        // Unset: every kind, as the known providers' models take.
        assert_eq!(routes.input_of(&smart.fallbacks[0]), InputKind::ALL);
        let table = routes.price_table("USD".into()).expect("one price each");
        let usage = crate::provider::Usage {
            input_tokens: 1_000_000,
            output_tokens: 1_000_000,
            ..Default::default()
        };
        // The fallback is priced by the route whose primary it is.
        assert_eq!(
            table.priced(&smart.fallbacks[0], usage).cost_micros,
            18_000_000
        );
        assert_eq!(table.priced(&smart.primary, usage).cost_micros, 2_000_000);

        let mut clash = config.routes.clone();
        let mut cheap = clash["smart"].clone();
        cheap.prices = Some(crate::pricing::PricesConfig {
            input: 0.1,
            output: 0.1,
            ..Default::default()
        });
        clash.insert("cheap".into(), cheap);
        let error = Routes::from_config(&clash, &providers())
            .expect("valid routes")
            .price_table("USD".into())
            .expect_err("one model, two prices");
        assert!(error.to_string().contains("models.smart.prices"), "{error}");
        for bad in [
            "context_window = 0",
            "input = [\"video\"]",
            "prices = { input = -1.0, output = 1.0 }",
        ] {
            let parsed: Result<crate::allow::ModelsConfig, _> =
                toml::from_str(&format!("[x]\nprimary = \"openai/gpt\"\n{bad}\n"));
            let refused = match parsed {
                Err(_) => true,
                Ok(config) => Routes::from_config(&config.routes, &providers()).is_err(),
            };
            assert!(refused, "{bad}");
        }
    }

    #[test]
    fn routes_sit_beside_the_allow_list_in_models() {
        let config: crate::allow::ModelsConfig = toml::from_str(
            "allowed = [\"openai/gpt-4.1*\"]\n\n[smart]\nprimary = \"openai/gpt-4.1-mini\"\nfallbacks = [\"anthropic/claude-sonnet-4-5\"]\n",
        )
        .expect("parses");
        assert_eq!(
            config.allowed.as_deref(),
            Some(&["openai/gpt-4.1*".to_owned()][..])
        );
        assert_eq!(
            config.routes["smart"].fallbacks,
            ["anthropic/claude-sonnet-4-5"]
        );
        let typo: Result<crate::allow::ModelsConfig, _> =
            toml::from_str("[smart]\nprimery = \"openai/x\"\n");
        assert!(typo.is_err(), "unknown keys of a route are refused");
    }
}
