//! PLACEHOLDER: lands with the HTTP providers work.

use super::{ModelRequest, ModelResponse, Provider, ProviderError, ProviderSettings};

/// PLACEHOLDER.
#[derive(Debug)]
pub struct AnthropicProvider {
    settings: ProviderSettings,
}

impl AnthropicProvider {
    /// Builds the provider from its settings.
    pub fn new(settings: ProviderSettings) -> Result<Self, ProviderError> {
        Ok(Self { settings })
    }
}

impl Provider for AnthropicProvider {
    fn id(&self) -> &str {
        &self.settings.id
    }

    fn complete(&self, _request: &ModelRequest) -> Result<ModelResponse, ProviderError> {
        Err(ProviderError::Cancelled {
            provider: self.settings.id.clone(),
        })
    }
}
