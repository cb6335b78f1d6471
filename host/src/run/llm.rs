//! `llm.complete` for engines, answered by the host's providers; and the choice of the model
//! compaction summaries come from.
//!
//! Why the host answers rather than the engine calling a provider itself: keys, base URLs,
//! retries and timeouts live in one config, and an engine in a library never sees a key.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rampart_engine_api::host::{LlmFailure, LlmRequest, LlmResponse};
use rampart_engine_api::protocol::ModelRef;
use rampart_engine_api::{EngineError, ErrorKind};
use rampart_message::ContentBlock;

use super::ModelSource;
use crate::config::serve::EngineCredentials;
use crate::config::{Config, ModelName};
use crate::engine::services::LlmService;
use crate::providers::registry::Providers;
use crate::providers::{
    ApiKind, ClientCredential, Forwarded, ModelRequest, ProviderError, ProviderErrorKind,
};

/// Answers `llm.complete` with the model the request names.
pub struct ProvidersLlm {
    providers: Arc<Providers>,
    credentials: Option<Arc<EngineCredentialBook>>,
}

impl ProvidersLlm {
    /// A service over `providers`, with the providers' own keys.
    pub fn new(providers: Arc<Providers>) -> Self {
        Self {
            providers,
            credentials: None,
        }
    }

    /// Answers each request with the credential `book` holds for its session
    /// (`rampart serve`, [`EngineCredentials`]).
    pub fn with_credentials(mut self, book: Arc<EngineCredentialBook>) -> Self {
        self.credentials = Some(book);
        self
    }
}

/// Sessions whose client credential [`EngineCredentialBook`] keeps; past it the book starts
/// over (an engine call then goes with the provider's key until the client's next request).
pub const CREDENTIAL_BOOK_CAP: usize = 4_096;

/// The credential each conversation's client presented last, for the engine's model calls on
/// that conversation's behalf (`serve.engineCredentials`). In memory only, never written:
/// a key lives as long as the server that received it.
#[derive(Debug)]
pub struct EngineCredentialBook {
    mode: EngineCredentials,
    keys: Mutex<HashMap<String, ClientCredential>>,
}

impl EngineCredentialBook {
    /// A book under `mode`.
    pub fn new(mode: EngineCredentials) -> Self {
        Self {
            mode,
            keys: Mutex::default(),
        }
    }

    /// Records what the client of `session_id` presented on its latest request (only under
    /// `"client"`; a request without a key forgets the last one).
    pub fn remember(&self, session_id: &str, credential: Option<&ClientCredential>) {
        if self.mode != EngineCredentials::Client {
            return;
        }
        let Ok(mut keys) = self.keys.lock() else {
            return;
        };
        match credential {
            Some(c) => {
                if keys.len() >= CREDENTIAL_BOOK_CAP && !keys.contains_key(session_id) {
                    keys.clear();
                }
                keys.insert(session_id.to_string(), c.clone());
            }
            None => {
                keys.remove(session_id);
            }
        }
    }

    /// The credential an engine call for `session_id` goes with (`None`: the provider's own
    /// key); an error under `"none"`, which the engine answers by summarising without a model.
    pub fn for_session(
        &self,
        session_id: Option<&str>,
    ) -> Result<Option<ClientCredential>, EngineError> {
        match self.mode {
            EngineCredentials::None => Err(EngineError::new(
                ErrorKind::Unsupported,
                "serve.engineCredentials = \"none\": the context engine may not call a model; \
                 it summarises without one",
            )),
            EngineCredentials::Provider => Ok(None),
            EngineCredentials::Client => Ok(session_id
                .and_then(|id| self.keys.lock().ok().and_then(|keys| keys.get(id).cloned()))),
        }
    }
}

impl LlmService for ProvidersLlm {
    fn complete(&self, request: &LlmRequest) -> Result<LlmResponse, EngineError> {
        let Some(name) = request.model.as_deref() else {
            return Err(EngineError::new(
                ErrorKind::Unsupported,
                format!(
                    "llm.complete for `{}` named no model; this host only answers requests \
                     for the model it handed the engine (CompactParams.compactionModel)",
                    request.purpose
                ),
            ));
        };
        let name: ModelName = name
            .parse()
            .map_err(|e: crate::config::models::BadModelName| {
                EngineError::invalid_params(rampart_engine_api::host::service::LLM_COMPLETE, e)
            })?;
        let resolved = self
            .providers
            .resolve(&name)
            .map_err(|e| EngineError::new(ErrorKind::Host, e.to_string()))?;
        let credential = match &self.credentials {
            Some(book) => book.for_session(request.session_id.as_deref())?,
            None => None,
        };
        let started = Instant::now();
        let model_request = ModelRequest {
            model: name.model.clone(),
            system: request.system.clone(),
            messages: request.messages.iter().cloned().map(Arc::new).collect(),
            max_tokens: request.max_tokens,
            deadline: request
                .timeout_ms
                .map(|ms| started + Duration::from_millis(ms)),
            forwarded: Forwarded {
                credential,
                ..Default::default()
            },
        };
        let response = resolved
            .provider
            .complete(&model_request)
            .map_err(provider_error)?;
        let text = response
            .message
            .content
            .iter()
            .filter_map(|b| match b {
                ContentBlock::Text(t) => Some(t.text.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("");
        tracing::debug!(
            purpose = %request.purpose,
            model = %name,
            input_tokens = response.message.usage.input,
            output_tokens = response.message.usage.output,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "llm.complete answered"
        );
        Ok(LlmResponse {
            text,
            model: name.to_string(),
            input_tokens: response.message.usage.input,
            output_tokens: response.message.usage.output,
        })
    }
}

/// Maps a provider failure onto the engine error kinds, keeping the provider's text: an
/// overflow must stay recognisable to the engine, which shrinks its request and retries.
/// The provider's failure as the engine sees it: the text for people, and the typed class
/// with its figures for the engine to act on (an overflow's stated size crosses as a number).
fn provider_error(e: ProviderError) -> EngineError {
    let kind = match &e {
        ProviderError::Timeout { .. } => ErrorKind::Timeout,
        ProviderError::Cancelled { .. } => ErrorKind::Cancelled,
        _ => ErrorKind::Host,
    };
    let failure = match &e {
        ProviderError::ContextOverflow {
            observed_tokens, ..
        } => LlmFailure::ContextOverflow {
            observed_tokens: *observed_tokens,
        },
        other => match other.kind() {
            ProviderErrorKind::ContextOverflow => LlmFailure::ContextOverflow {
                observed_tokens: None,
            },
            ProviderErrorKind::RateLimited => LlmFailure::RateLimited,
            ProviderErrorKind::Transient => LlmFailure::Transient,
            ProviderErrorKind::Auth | ProviderErrorKind::MissingApiKey => LlmFailure::Auth,
            ProviderErrorKind::Unreachable => LlmFailure::Unreachable,
            ProviderErrorKind::Timeout => LlmFailure::Timeout,
            ProviderErrorKind::BadRequest => LlmFailure::BadRequest,
            ProviderErrorKind::InvalidResponse => LlmFailure::InvalidResponse,
            ProviderErrorKind::Cancelled => LlmFailure::Cancelled,
        },
    };
    EngineError::new(kind, e.to_string()).with_llm_failure(&failure)
}

/// The model compaction summaries come from: `agents.defaults.compaction.model` when set,
/// else the chat model when it is a real one (not the simulator, which cannot summarise),
/// else none, and the engine summarises with its embedded extractive summariser.
pub fn compaction_model(
    config: &Config,
    providers: &Providers,
    chat: &ModelRef,
) -> Result<Option<ModelRef>, super::TurnError> {
    let name = match &config.agent_defaults.compaction.model {
        // Checked when the configuration was loaded: the compaction settings and the engine
        // read it with one parser. Its form is checked here, where it becomes a model.
        Some(name) => name
            .parse::<ModelName>()
            .map_err(|e| super::TurnError::UnknownModel {
                name: name.clone(),
                problem: format!("agents.defaults.compaction.model: {e}"),
            })?,
        None => {
            let is_sim = providers
                .settings(&chat.provider)
                .is_none_or(|s| s.api == ApiKind::Sim);
            if is_sim {
                return Ok(None);
            }
            ModelName::new(chat.provider.clone(), chat.id.clone())
        }
    };
    // The simulator only echoes; a summary from it would be noise. Its users get the
    // embedded extractive summariser instead, which at least says what it is.
    if providers
        .settings(&name.provider)
        .is_some_and(|s| s.api == ApiKind::Sim)
    {
        return Ok(None);
    }
    let window = crate::models::resolve_window(config, &name, providers.reported_window(&name));
    Ok(Some(ModelRef {
        provider: name.provider,
        id: name.model,
        context_window: Some(window.tokens),
    }))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "llm_tests.rs"]
mod tests;
