//! Builds an agent's model client from its provider definition.

use crate::config::{AgentDef, Config, ProviderKind};
use crate::model::{ChatModel, OpenAiClient, OpenAiConfig, ScriptedModel};
use std::sync::Arc;
use std::time::Duration;

/// First retry delay of model calls; it doubles per retry.
const BACKOFF_BASE: Duration = Duration::from_millis(500);

/// The model client for `def`: an OpenAI-compatible client, or the built-in scripted rules.
/// The API key is read from the environment variable the provider names, never from a file.
pub fn build_model(def: &AgentDef, config: &Config) -> Result<Arc<dyn ChatModel>, String> {
    let provider = config
        .provider_for(&def.model)
        .ok_or_else(|| format!("unknown provider \"{}\"", def.model.provider))?;
    match provider.kind {
        ProviderKind::Scripted => {
            let model = match def.rules_file() {
                Some(path) => ScriptedModel::from_rules_file(&path)?,
                None => ScriptedModel::echo(),
            };
            Ok(Arc::new(model))
        }
        ProviderKind::OpenAi => {
            let base_url = provider
                .base_url
                .clone()
                .ok_or_else(|| format!("provider \"{}\" has no base_url", provider.name))?;
            let api_key = match &provider.api_key_env {
                Some(var) => match std::env::var(var) {
                    Ok(v) if !v.is_empty() => Some(v),
                    _ => {
                        return Err(format!(
                            "environment variable {var} (api_key_env of provider \"{}\") is not set",
                            provider.name
                        ));
                    }
                },
                None => None,
            };
            let client = OpenAiClient::new(OpenAiConfig {
                base_url,
                api_key,
                timeout: provider.timeout,
                max_retries: provider.max_retries,
                backoff_base: BACKOFF_BASE,
            })
            .map_err(|e| e.to_string())?;
            Ok(Arc::new(client))
        }
    }
}
