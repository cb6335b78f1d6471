//! The provider registry: every provider of the configuration, built at most once each.
//!
//! The settings are read and checked when the configuration is loaded
//! ([`crate::config::models`]); this module only builds providers from them.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use super::anthropic::AnthropicProvider;
use super::openai::OpenAiProvider;
use super::responses::ResponsesProvider;
use super::sim::SimProvider;
use super::{ApiKind, Provider, ProviderError, ProviderSettings};
use crate::config::models::normalize_provider;
/// Re-exported from the configuration, where they are defined.
pub use crate::config::models::{SIM_DEFAULT_MODEL, SIM_PROVIDER_ID};
use crate::config::{Config, ModelName, ModelsConfigError};

/// What can go wrong finding or building a provider.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// A `models.providers` setting is malformed.
    #[error(transparent)]
    Config(#[from] ModelsConfigError),
    /// A provider's constructor refused its settings.
    #[error(transparent)]
    Provider(#[from] ProviderError),
    /// A provider id that is neither configured nor well known.
    #[error(
        "no provider `{provider}`: add a [models.providers.{provider}] table with `api` (and `baseUrl`), or use one of: {}",
        known.join(", ")
    )]
    UnknownProvider {
        /// The id asked for.
        provider: String,
        /// The ids available.
        known: Vec<String>,
    },
}

/// Settings a provider refused though they came by hand, not from a file: named as such.
impl From<super::sim::SettingsError> for RegistryError {
    fn from(e: super::sim::SettingsError) -> Self {
        Self::Config(ModelsConfigError {
            file: "provider settings".to_owned(),
            key: e.key,
            problem: e.problem,
        })
    }
}

/// Builds the provider its settings describe. The simulator fails only on settings the
/// registry would already have refused; the HTTP providers may refuse theirs.
pub fn build_provider(settings: ProviderSettings) -> Result<Arc<dyn Provider>, RegistryError> {
    tracing::debug!(provider = %settings.id, api = ?settings.api, "building provider");
    Ok(match settings.api {
        ApiKind::Sim => Arc::new(SimProvider::new(&settings)?),
        ApiKind::OpenAiCompletions => Arc::new(OpenAiProvider::new(settings)?),
        ApiKind::OpenAiResponses => Arc::new(ResponsesProvider::new(settings)?),
        ApiKind::AnthropicMessages => Arc::new(AnthropicProvider::new(settings)?),
    })
}

// ---------------------------------------------------------------------------
// The registry
// ---------------------------------------------------------------------------

/// Every provider of a configuration, built at most once each and shared by every session.
///
/// All settings are read and checked when the registry is made, so a typo in any provider
/// table stops the host at start rather than at the first turn that uses it. Simulators are
/// built then too (they cannot fail later); the HTTP providers are built on first use, so a
/// configured but unused provider whose key is not set does not get in the way.
pub struct Providers {
    /// By normalised id.
    settings: BTreeMap<String, ProviderSettings>,
    /// Simulators by normalised id; the same instances are in `built`.
    sims: HashMap<String, Arc<SimProvider>>,
    /// Providers built so far, by normalised id.
    built: Mutex<HashMap<String, Arc<dyn Provider>>>,
}

impl std::fmt::Debug for Providers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Providers")
            .field("ids", &self.settings.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl Providers {
    /// Reads every `[models.providers.*]` table plus the well-known ids, and builds the
    /// simulators.
    pub fn from_config(config: &Config) -> Result<Self, RegistryError> {
        let settings: BTreeMap<String, ProviderSettings> = config
            .models
            .providers()
            .map(|s| (normalize_provider(&s.id), s.clone()))
            .collect();
        let mut sims = HashMap::new();
        let mut built: HashMap<String, Arc<dyn Provider>> = HashMap::new();
        for (key, s) in &settings {
            if s.api == ApiKind::Sim {
                let sim = Arc::new(SimProvider::new(s)?);
                built.insert(key.clone(), Arc::clone(&sim) as Arc<dyn Provider>);
                sims.insert(key.clone(), sim);
            }
        }
        tracing::debug!(providers = ?settings.keys().collect::<Vec<_>>(), "providers configured");
        Ok(Self {
            settings,
            sims,
            built: Mutex::new(built),
        })
    }

    /// The provider with this id, built on first use.
    pub fn provider(&self, id: &str) -> Result<Arc<dyn Provider>, RegistryError> {
        let key = normalize_provider(id);
        let mut built = lock(&self.built);
        if let Some(p) = built.get(&key) {
            return Ok(Arc::clone(p));
        }
        let Some(settings) = self.settings.get(&key) else {
            return Err(RegistryError::UnknownProvider {
                provider: id.to_string(),
                known: self.ids(),
            });
        };
        let provider = build_provider(settings.clone())?;
        built.insert(key, Arc::clone(&provider));
        Ok(provider)
    }

    /// The provider serving `name`.
    pub fn get(&self, name: &ModelName) -> Result<Arc<dyn Provider>, RegistryError> {
        self.provider(&name.provider)
    }

    /// The simulator with this id, when that provider is one: a replay queues recorded
    /// replies on it with [`SimProvider::push_reply`], and tests read its log.
    pub fn sim(&self, id: &str) -> Option<Arc<SimProvider>> {
        self.sims.get(&normalize_provider(id)).cloned()
    }

    /// The checked settings of a provider: its models' windows and tokenizers, for the guard
    /// and the precheck.
    pub fn settings(&self, id: &str) -> Option<&ProviderSettings> {
        self.settings.get(&normalize_provider(id))
    }

    /// The provider ids, as their tables spell them, sorted by normalised id.
    pub fn ids(&self) -> Vec<String> {
        self.settings.values().map(|s| s.id.clone()).collect()
    }
}

/// Locks, taking over a poisoned lock: the map is only ever inserted into whole entries.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
