//! What a model call costs: the prices of the `[models.NAME]` entries, per
//! million tokens in the `[pricing] currency`, applied to the usage the
//! provider reported.
//!
//! ```toml
//! [pricing]
//! currency = "USD"                 # ISO 4217; the default
//!
//! [models.smart]
//! primary = "openai/gpt-4.1-mini"
//! prices = { input = 0.40, cached_input = 0.10, cache_write = 0.0, output = 1.60 }
//! ```
//!
//! A route's prices are those of its primary model: a model gets its price
//! from the route whose primary it is, wherever it is called (a fallback of
//! another route too). A call to a model no route prices costs 0 and is
//! counted in `parley_unpriced_calls_total{model}`; the runner warns at
//! start of each routed model without a price once any route has one.
//!
//! The arithmetic is in integers: a price of P per million tokens is P
//! millionths of the currency per token, which is P micro-units; each
//! price is kept in millionths of a micro-unit (pico-units), so prices
//! with six decimals are exact, and a call's cost is rounded to the
//! nearest micro-unit once.

use std::{collections::HashMap, sync::Arc};

use parley_grpc::config::{ConfigError, invalid};
use serde::{Deserialize, Serialize};

use crate::provider::{ModelChoice, Usage};

/// The highest price accepted, per million tokens: far above any model's,
/// low enough that no count of tokens overflows the arithmetic.
pub const MAX_PRICE: f64 = 1_000_000.0;

/// `[pricing]`: the currency every price is in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PricingConfig {
    /// The ISO 4217 code of the currency of every price (and of every
    /// `Usage.cost_micros`).
    pub currency: String,
}

impl Default for PricingConfig {
    fn default() -> Self {
        Self {
            currency: "USD".into(),
        }
    }
}

impl PricingConfig {
    /// The currency, checked: three capital letters.
    pub fn checked_currency(&self) -> Result<String, ConfigError> {
        let code = self.currency.as_str();
        if code.len() == 3 && code.bytes().all(|b| b.is_ascii_uppercase()) {
            Ok(code.to_owned())
        } else {
            Err(invalid(
                "pricing.currency",
                format!("`{code}` is not an ISO 4217 code (three capital letters, such as USD)"),
            ))
        }
    }
}

/// A model's prices as written: currency units per million tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PricesConfig {
    /// Prompt tokens neither read from nor written to the cache.
    pub input: f64,
    /// Prompt tokens read from the provider's cache (the input price when
    /// unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_input: Option<f64>,
    /// Prompt tokens written to the provider's cache (the input price when
    /// unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write: Option<f64>,
    /// Generated tokens, reasoning included.
    pub output: f64,
}

/// A model's prices, in pico-units (10⁻¹² of the currency) per token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prices {
    input: u64,
    cached_input: u64,
    cache_write: u64,
    output: u64,
}

impl Prices {
    /// `config` checked (`field` names it in an error): every price finite,
    /// at least 0, at most [`MAX_PRICE`].
    pub fn from_config(config: &PricesConfig, field: &str) -> Result<Self, ConfigError> {
        let picos = |name: &str, price: f64| {
            if price.is_finite() && (0.0..=MAX_PRICE).contains(&price) {
                // At most 10¹² pico-units per token: exact in f64.
                #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
                Ok((price * 1e6).round() as u64)
            } else {
                Err(invalid(
                    format!("{field}.{name}"),
                    format!("a price per million tokens is 0 to {MAX_PRICE}"),
                ))
            }
        };
        Ok(Self {
            input: picos("input", config.input)?,
            cached_input: picos("cached_input", config.cached_input.unwrap_or(config.input))?,
            cache_write: picos("cache_write", config.cache_write.unwrap_or(config.input))?,
            output: picos("output", config.output)?,
        })
    }

    /// What `usage` costs, in micro-units, rounded to the nearest. The
    /// uncached prompt tokens are those neither read from nor written to
    /// the cache (`input_tokens` counts all three).
    pub fn cost_micros(&self, usage: &Usage) -> u64 {
        let uncached = usage
            .input_tokens
            .saturating_sub(usage.cached_input_tokens)
            .saturating_sub(usage.cache_write_tokens);
        let picos = [
            (uncached, self.input),
            (usage.cached_input_tokens, self.cached_input),
            (usage.cache_write_tokens, self.cache_write),
            (usage.output_tokens, self.output),
        ]
        .into_iter()
        .fold(0u128, |sum, (tokens, price)| {
            sum.saturating_add(u128::from(tokens) * u128::from(price))
        });
        u64::try_from((picos + 500_000) / 1_000_000).unwrap_or(u64::MAX)
    }
}

/// Every priced model, by `provider/model`, and the currency.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PriceTable {
    currency: Arc<str>,
    by_model: HashMap<String, Prices>,
}

impl Default for PriceTable {
    fn default() -> Self {
        Self {
            currency: PricingConfig::default().currency.into(),
            by_model: HashMap::new(),
        }
    }
}

impl PriceTable {
    /// A table in `currency` of `priced` (`provider/model`, its prices, the
    /// route it came from); one model priced differently by two routes is
    /// an error naming the second.
    pub fn new<'a>(
        currency: String,
        priced: impl IntoIterator<Item = (String, Prices, &'a str)>,
    ) -> Result<Self, ConfigError> {
        let mut by_model: HashMap<String, Prices> = HashMap::new();
        for (model, prices, route) in priced {
            match by_model.get(&model) {
                Some(known) if *known != prices => {
                    return Err(invalid(
                        format!("models.{route}.prices"),
                        format!("`{model}` is priced differently by another route"),
                    ));
                }
                _ => {
                    by_model.insert(model, prices);
                }
            }
        }
        Ok(Self {
            currency: currency.into(),
            by_model,
        })
    }

    /// The currency of every cost.
    pub fn currency(&self) -> &str {
        &self.currency
    }

    /// The currency the wire's usage names: none (empty) when no model
    /// has a price, so that a cost of 0 reads as unknown, not as free.
    pub fn wire_currency(&self) -> Arc<str> {
        if self.by_model.is_empty() {
            Arc::from("")
        } else {
            self.currency.clone()
        }
    }

    /// Whether any model has a price.
    pub fn is_empty(&self) -> bool {
        self.by_model.is_empty()
    }

    /// The prices of `model`, when a route sets them.
    pub fn get(&self, model: &ModelChoice) -> Option<&Prices> {
        if self.by_model.is_empty() {
            return None;
        }
        self.by_model
            .get(format!("{}/{}", model.provider, model.model).as_str())
    }

    /// `usage` of a call to `model`, its cost filled in (0 when the model
    /// has no price, counted in `parley_unpriced_calls_total`).
    pub fn priced(&self, model: &ModelChoice, mut usage: Usage) -> Usage {
        match self.get(model) {
            Some(prices) => usage.cost_micros = prices.cost_micros(&usage),
            None => {
                usage.cost_micros = 0;
                if !self.by_model.is_empty() {
                    crate::observe::unpriced_call(&model.provider, &model.model);
                }
            }
        }
        usage
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prices(input: f64, cached: Option<f64>, write: Option<f64>, output: f64) -> Prices {
        Prices::from_config(
            &PricesConfig {
                input,
                cached_input: cached,
                cache_write: write,
                output,
            },
            "models.m.prices",
        )
        .expect("valid prices")
    }

    fn usage(input: u64, cached: u64, written: u64, output: u64) -> Usage {
        Usage {
            input_tokens: input,
            output_tokens: output,
            cached_input_tokens: cached,
            cache_write_tokens: written,
            ..Usage::default()
        }
    }

    #[test]
    fn each_kind_of_token_has_its_price() {
        // gpt-4.1-mini's list prices: 0.40 in, 0.10 cached, 1.60 out.
        let mini = prices(0.40, Some(0.10), Some(0.0), 1.60);
        // 10 000 prompt tokens, 8 000 of them cached; 500 out:
        // 2 000 × 0.40 + 8 000 × 0.10 + 500 × 1.60 = 800 + 800 + 800 µ.
        assert_eq!(mini.cost_micros(&usage(10_000, 8_000, 0, 500)), 2_400);
        // Claude-style cache writes at 1.25× input (3.00 → 3.75).
        let sonnet = prices(3.0, Some(0.30), Some(3.75), 15.0);
        // 100 uncached, 2 000 written, 3 000 read, 200 out.
        assert_eq!(
            sonnet.cost_micros(&usage(5_100, 3_000, 2_000, 200)),
            300 + 7_500 + 900 + 3_000
        );
        // Unset cache prices are the input price.
        let plain = prices(1.0, None, None, 2.0);
        assert_eq!(plain.cost_micros(&usage(1_000, 600, 400, 0)), 1_000);
    }

    #[test]
    fn costs_round_to_the_nearest_micro_unit_once() {
        let cheap = prices(0.075, None, None, 0.30);
        // 7 × 0.075 = 0.525 µ → 1; 1 × 0.30 + 1 × 0.075 = 0.375 → 0.
        assert_eq!(cheap.cost_micros(&usage(7, 0, 0, 0)), 1);
        assert_eq!(cheap.cost_micros(&usage(1, 0, 0, 1)), 0);
        // Six decimals are exact: 1 000 000 × 0.000001 = 1 µ.
        let tiny = prices(0.000_001, None, None, 0.0);
        assert_eq!(tiny.cost_micros(&usage(1_000_000, 0, 0, 0)), 1);
        // No count overflows.
        let dear = prices(MAX_PRICE, None, None, MAX_PRICE);
        assert_eq!(dear.cost_micros(&usage(u64::MAX, 0, 0, u64::MAX)), u64::MAX);
    }

    #[test]
    fn prices_are_finite_and_bounded() {
        for (bad, field) in [
            (-0.1, "models.m.prices.input"),
            (f64::NAN, "models.m.prices.input"),
            (MAX_PRICE * 2.0, "models.m.prices.input"),
        ] {
            let error = Prices::from_config(
                &PricesConfig {
                    input: bad,
                    output: 1.0,
                    ..PricesConfig::default()
                },
                "models.m.prices",
            )
            .expect_err("refused");
            assert!(error.to_string().contains(field), "{error}");
        }
        let currency = |code: &str| {
            PricingConfig {
                currency: code.into(),
            }
            .checked_currency()
        };
        assert_eq!(currency("EUR").expect("valid"), "EUR");
        for bad in ["usd", "EURO", "", "U$D"] {
            assert!(currency(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_model_has_one_price_and_unpriced_models_cost_nothing() {
        let model = |provider: &str, model: &str| ModelChoice {
            provider: provider.into(),
            model: model.into(),
            params: Default::default(),
        };
        let mini = prices(0.40, Some(0.10), None, 1.60);
        let table = PriceTable::new(
            "EUR".into(),
            [
                ("openai/gpt-4.1-mini".to_owned(), mini, "smart"),
                ("openai/gpt-4.1-mini".to_owned(), mini, "also"),
            ],
        )
        .expect("the same price twice is one price");
        assert_eq!(table.currency(), "EUR");
        let priced = table.priced(&model("openai", "gpt-4.1-mini"), usage(1_000, 0, 0, 100));
        assert_eq!(priced.cost_micros, 400 + 160);
        let unpriced = table.priced(&model("anthropic", "claude"), usage(1_000, 0, 0, 100));
        assert_eq!(unpriced.cost_micros, 0);

        let clash = PriceTable::new(
            "USD".into(),
            [
                ("openai/gpt-4.1-mini".to_owned(), mini, "smart"),
                (
                    "openai/gpt-4.1-mini".to_owned(),
                    prices(1.0, None, None, 1.0),
                    "cheap",
                ),
            ],
        )
        .expect_err("two prices for one model");
        assert!(error_names(&clash, "models.cheap.prices"), "{clash}");
    }

    fn error_names(error: &ConfigError, field: &str) -> bool {
        error.to_string().contains(field)
    }
}
