//! Builds an agent's model client from its provider definition.

use crate::model::{
    AnthropicClient, AnthropicConfig, Breakers, Candidate, ChatModel, FallbackModel, OpenAiClient,
    OpenAiConfig, ScriptedModel,
};
use crate::secrets::Secrets;
use clawbus_core::config::{AgentDef, Config, ModelRef, ProviderDef, ProviderKind};
use std::sync::Arc;
use std::time::Duration;

/// First retry delay of model calls; it doubles per retry.
const BACKOFF_BASE: Duration = Duration::from_millis(500);

/// Why a model client could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ModelBuildError {
    /// The agent names a provider that is not configured.
    #[error("unknown provider \"{0}\"")]
    UnknownProvider(String),
    /// The scripted rules file could not be read or parsed.
    #[error("{0}")]
    Rules(#[source] crate::model::RulesError),
    /// An OpenAI-compatible provider without `base_url`.
    #[error("provider \"{0}\" has no base_url")]
    NoBaseUrl(String),
    /// The provider's `api_key_env` names a variable that is not set.
    #[error("environment variable {var} (api_key_env of provider \"{provider}\") is not set")]
    MissingKey {
        /// The variable.
        var: String,
        /// The provider.
        provider: String,
    },
    /// The HTTP client could not be built.
    #[error(transparent)]
    Client(#[from] crate::model::ModelError),
}

/// The model client for `def`: an OpenAI-compatible or Anthropic client sending the agent's
/// `[model_params]`, or the built-in scripted rules. The API key is read from the environment
/// variable the provider names, never from a file. An agent with `fallbacks` gets a
/// [`FallbackModel`] over its model and the fallbacks, guarded by the circuit breakers of
/// [`Breakers::global`]; a running system passes its own registry to [`build_model_with`].
/// The HTTP clients redact every secret value of `config` (their key first) from their errors.
pub fn build_model(def: &AgentDef, config: &Config) -> Result<Arc<dyn ChatModel>, ModelBuildError> {
    build_model_with(def, config, Breakers::global())
}

/// Like [`build_model`], with the circuit breakers of `breakers` (one registry per process, so
/// that agents calling the same provider share its breaker).
pub fn build_model_with(
    def: &AgentDef,
    config: &Config,
    breakers: &Breakers,
) -> Result<Arc<dyn ChatModel>, ModelBuildError> {
    let primary = build_client(def, &def.model, config)?;
    if def.fallbacks.is_empty() {
        return Ok(primary);
    }
    let candidate = |model: &ModelRef, client| {
        let policy = config
            .provider_for(model)
            .map_or_else(Default::default, |p| p.breaker);
        Candidate::new(
            &model.provider,
            &model.model,
            client,
            breakers.for_provider_with(&model.provider, policy),
        )
    };
    let fallbacks = def
        .fallbacks
        .iter()
        .map(|m| Ok(candidate(m, build_client(def, m, config)?)))
        .collect::<Result<Vec<_>, ModelBuildError>>()?;
    Ok(Arc::new(FallbackModel::new(
        candidate(&def.model, primary),
        fallbacks,
    )))
}

/// The client of one model of `def` (its own or a fallback).
fn build_client(
    def: &AgentDef,
    model: &ModelRef,
    config: &Config,
) -> Result<Arc<dyn ChatModel>, ModelBuildError> {
    let provider = config
        .provider_for(model)
        .ok_or_else(|| ModelBuildError::UnknownProvider(model.provider.clone()))?;
    match provider.kind {
        ProviderKind::Scripted => {
            let model = match def.rules_file_for(&model.model) {
                Some(path) => {
                    ScriptedModel::from_rules_file(&path).map_err(ModelBuildError::Rules)?
                }
                None => ScriptedModel::echo(),
            };
            Ok(Arc::new(model))
        }
        ProviderKind::OpenAi => {
            let base_url = provider
                .base_url
                .clone()
                .ok_or_else(|| ModelBuildError::NoBaseUrl(provider.name.clone()))?;
            let client = OpenAiClient::new(OpenAiConfig {
                base_url,
                api_key: api_key(provider)?,
                timeout: provider.timeout,
                max_retries: provider.max_retries,
                backoff_base: BACKOFF_BASE,
            })?
            .with_max_response_bytes(&provider.name, provider.max_response_bytes)
            .with_default_max_tokens(provider.max_tokens)
            .with_images(provider.images)
            .with_params(def.model_params.clone())
            .with_secrets(Secrets::from_config(config));
            Ok(Arc::new(client))
        }
        ProviderKind::Anthropic => {
            let defaults = AnthropicConfig::default();
            let client = AnthropicClient::new(AnthropicConfig {
                base_url: provider.base_url.clone().unwrap_or(defaults.base_url),
                api_key: api_key(provider)?,
                timeout: provider.timeout,
                max_retries: provider.max_retries,
                backoff_base: BACKOFF_BASE,
                max_tokens: provider.max_tokens.unwrap_or(defaults.max_tokens),
            })?
            .with_max_response_bytes(&provider.name, provider.max_response_bytes)
            .with_images(provider.images)
            .with_params(def.model_params.clone())
            .with_secrets(Secrets::from_config(config));
            Ok(Arc::new(client))
        }
    }
}

/// The key from the variable `api_key_env` names; `None` when the provider names none.
fn api_key(provider: &ProviderDef) -> Result<Option<String>, ModelBuildError> {
    let Some(var) = &provider.api_key_env else {
        return Ok(None);
    };
    match std::env::var(var) {
        Ok(v) if !v.is_empty() => Ok(Some(v)),
        _ => Err(ModelBuildError::MissingKey {
            var: var.clone(),
            provider: provider.name.clone(),
        }),
    }
}
