//! The configured providers, by name, and how a request's model reference
//! resolves against them (empty provider → the default provider, empty
//! model → that provider's default model).

use std::{collections::BTreeMap, sync::Arc};

use super::{Provider, SamplingParams};

/// A provider and model, resolved against the configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelChoice {
    /// The configured provider name.
    pub provider: String,
    /// The provider's model name.
    pub model: String,
    /// Sampling parameters.
    pub params: SamplingParams,
}

/// One configured provider.
#[derive(Debug, Clone)]
pub struct ProviderEntry {
    /// The adapter.
    pub provider: Arc<dyn Provider>,
    /// The model used when a request names none.
    pub default_model: String,
}

/// Every configured provider.
#[derive(Debug, Clone)]
pub struct Providers {
    entries: BTreeMap<String, ProviderEntry>,
    default: String,
}

/// A request named a provider the runner does not have.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown provider `{0}`")]
pub struct UnknownProvider(pub String);

impl Providers {
    /// A registry whose default is `default`, which must be one of `entries`.
    pub fn new(
        entries: BTreeMap<String, ProviderEntry>,
        default: impl Into<String>,
    ) -> Result<Self, UnknownProvider> {
        let default = default.into();
        if !entries.contains_key(&default) {
            return Err(UnknownProvider(default));
        }
        Ok(Self { entries, default })
    }

    /// A registry with a single provider, which is the default.
    pub fn single(
        name: impl Into<String>,
        provider: Arc<dyn Provider>,
        default_model: impl Into<String>,
    ) -> Self {
        let name = name.into();
        let entry = ProviderEntry {
            provider,
            default_model: default_model.into(),
        };
        Self {
            entries: BTreeMap::from([(name.clone(), entry)]),
            default: name,
        }
    }

    /// The adapter named `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Provider>> {
        self.entries.get(name).map(|entry| &entry.provider)
    }

    /// The default provider's name.
    pub fn default_name(&self) -> &str {
        &self.default
    }

    /// The configured provider names.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.entries.keys().map(String::as_str)
    }

    /// Every provider's name and default model.
    pub fn default_models(&self) -> impl Iterator<Item = (&str, &str)> {
        self.entries
            .iter()
            .map(|(name, entry)| (name.as_str(), entry.default_model.as_str()))
    }

    /// Fills in the default provider and model of a reference.
    pub fn resolve(&self, mut choice: ModelChoice) -> Result<ModelChoice, UnknownProvider> {
        if choice.provider.is_empty() {
            choice.provider = self.default.clone();
        }
        let entry = self
            .entries
            .get(&choice.provider)
            .ok_or_else(|| UnknownProvider(choice.provider.clone()))?;
        if choice.model.is_empty() {
            choice.model = entry.default_model.clone();
        }
        Ok(choice)
    }
}
