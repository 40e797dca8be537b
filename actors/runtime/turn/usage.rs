//! Token usage of a turn, summed over its model calls, and what it cost.
//!
//! Each call's usage comes from the provider's usage fields; a call whose server sent none is
//! estimated at 4 characters a token over the request and the reply, and the turn's usage is then
//! marked `estimated`. Prompt tokens count every input token, cached or not; the cost charges the
//! cache reads and writes at their prices and the rest of the prompt at the input price.
//!
//! A turn's calls may be answered by different models (a fallback after the primary failed):
//! [`UsageByModel`] keeps the tokens of each model apart, so each is priced at its own model's
//! price and counted under that model.

use crate::model::{ChatRequest, ModelReply, Usage};
use clawbus_core::config::Price;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// Characters per token of the estimate used when a server reports no usage.
pub(crate) const CHARS_PER_TOKEN: u64 = 4;

/// The tokens of a turn, summed over its model calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct TurnUsage {
    /// Prompt tokens, cached or not.
    pub prompt_tokens: u64,
    /// Tokens the model generated.
    pub completion_tokens: u64,
    /// Of the prompt tokens, those read from the provider's cache.
    pub cache_read_tokens: u64,
    /// Of the prompt tokens, those written to the provider's cache.
    pub cache_write_tokens: u64,
    /// Whether any call's usage was estimated because its server sent none.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub estimated: bool,
}

impl TurnUsage {
    /// Adds one model call: the provider's usage, or an estimate when it sent none
    /// (`tool_chars`: [`crate::model::schema_chars`] of the request's tools, counted once per
    /// tool set).
    pub(crate) fn add_call(
        &mut self,
        request: &ChatRequest,
        tool_chars: usize,
        reply: &ModelReply,
    ) {
        let (usage, estimated) = match reply.usage {
            Some(u) => (u, false),
            None => (estimate(request, tool_chars, reply), true),
        };
        self.add(&TurnUsage {
            prompt_tokens: usage.prompt_tokens,
            completion_tokens: usage.completion_tokens,
            cache_read_tokens: usage.cache_read_tokens.unwrap_or(0),
            cache_write_tokens: usage.cache_write_tokens.unwrap_or(0),
            estimated,
        });
    }

    /// Prompt tokens neither read from nor written to the cache.
    pub(crate) fn uncached_input_tokens(&self) -> u64 {
        self.prompt_tokens
            .saturating_sub(self.cache_read_tokens)
            .saturating_sub(self.cache_write_tokens)
    }

    /// What the tokens cost at `price`, in US dollars.
    pub fn cost_usd(&self, price: &Price) -> f64 {
        (self.uncached_input_tokens() as f64 * price.input_per_mtok
            + self.completion_tokens as f64 * price.output_per_mtok
            + self.cache_read_tokens as f64 * price.cache_read_per_mtok
            + self.cache_write_tokens as f64 * price.cache_write_per_mtok)
            / 1_000_000.0
    }

    /// The usage as the task result carries it: the token counts, `estimated` when it is,
    /// `agent` and `model` (`provider/model`), and `cost_usd` when the model has a price.
    pub fn to_json(&self, agent: &str, model: &str, price: Option<&Price>) -> Value {
        let mut v = serde_json::to_value(self).unwrap_or(Value::Null);
        if let Some(obj) = v.as_object_mut() {
            obj.insert("agent".into(), Value::from(agent));
            obj.insert("model".into(), Value::from(model));
            if let Some(p) = price {
                obj.insert("cost_usd".into(), Value::from(self.cost_usd(p)));
            }
        }
        v
    }

    /// Adds another sum of tokens to this one.
    pub fn add(&mut self, other: &TurnUsage) {
        self.prompt_tokens = self.prompt_tokens.saturating_add(other.prompt_tokens);
        self.completion_tokens = self
            .completion_tokens
            .saturating_add(other.completion_tokens);
        self.cache_read_tokens = self
            .cache_read_tokens
            .saturating_add(other.cache_read_tokens);
        self.cache_write_tokens = self
            .cache_write_tokens
            .saturating_add(other.cache_write_tokens);
        self.estimated |= other.estimated;
    }
}

/// The tokens of a turn per model that answered (`provider/model`), in the order the models
/// first answered.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct UsageByModel {
    models: Vec<(String, TurnUsage)>,
    /// The model that answered the last call.
    last: Option<String>,
    /// For a model named by the server's answer rather than configured: the configured model
    /// whose price applies.
    priced_as: BTreeMap<String, String>,
}

impl UsageByModel {
    /// Adds one model call answered by `model` (`provider/model`); `tool_chars` is
    /// [`crate::model::schema_chars`] of the request's tools.
    pub(crate) fn add_call(
        &mut self,
        model: &str,
        request: &ChatRequest,
        tool_chars: usize,
        reply: &ModelReply,
    ) {
        self.last = Some(model.to_owned());
        let at = match self.models.iter().position(|(m, _)| m == model) {
            Some(at) => at,
            None => {
                self.models.push((model.to_owned(), TurnUsage::default()));
                self.models.len() - 1
            }
        };
        if let Some((_, usage)) = self.models.get_mut(at) {
            usage.add_call(request, tool_chars, reply);
        }
    }

    /// Prices the tokens counted under `model` (a name a server answered with) at the price of
    /// `configured`, the model requested, when `model` has no price of its own.
    pub(crate) fn priced_as(&mut self, model: &str, configured: &str) {
        if model != configured {
            self.priced_as
                .insert(model.to_owned(), configured.to_owned());
        }
    }

    /// The price of `model`: its own, else that of the configured model it answered for.
    pub fn price<'p>(&self, model: &str, prices: &'p BTreeMap<String, Price>) -> Option<&'p Price> {
        prices.get(model).or_else(|| {
            self.priced_as
                .get(model)
                .and_then(|configured| prices.get(configured))
        })
    }

    /// Adds every model's tokens of `other`.
    pub fn merge(&mut self, other: &UsageByModel) {
        if other.last.is_some() {
            self.last.clone_from(&other.last);
        }
        for (served, configured) in &other.priced_as {
            self.priced_as.insert(served.clone(), configured.clone());
        }
        for (model, tokens) in &other.models {
            match self.models.iter_mut().find(|(m, _)| m == model) {
                Some((_, mine)) => mine.add(tokens),
                None => self.models.push((model.clone(), *tokens)),
            }
        }
    }

    /// Each model and its tokens.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &TurnUsage)> {
        self.models.iter().map(|(m, u)| (m.as_str(), u))
    }

    /// The tokens of every model together.
    pub fn total(&self) -> TurnUsage {
        let mut total = TurnUsage::default();
        for (_, usage) in &self.models {
            total.add(usage);
        }
        total
    }

    /// What the tokens cost, each model's at its price in `prices` (by `provider/model`);
    /// `None` when no model that answered has a price.
    pub fn cost_usd(&self, prices: &BTreeMap<String, Price>) -> Option<f64> {
        self.models
            .iter()
            .filter_map(|(m, u)| self.price(m, prices).map(|p| u.cost_usd(p)))
            .reduce(|a, b| a + b)
    }

    /// The usage as the task result carries it: the turn's total tokens (as
    /// [`TurnUsage::to_json`]) with `model` the model that answered last, and `models`: each model's tokens and cost.
    pub fn to_json(&self, agent: &str, own_model: &str, prices: &BTreeMap<String, Price>) -> Value {
        let last = self.last.as_deref().unwrap_or(own_model);
        let mut v = self.total().to_json(agent, last, None);
        if let Some(obj) = v.as_object_mut() {
            if let Some(cost) = self.cost_usd(prices) {
                obj.insert("cost_usd".into(), Value::from(cost));
            }
            let models: Vec<Value> = self
                .models
                .iter()
                .map(|(m, u)| {
                    let mut one = u.to_json(agent, m, self.price(m, prices));
                    if let Some(o) = one.as_object_mut() {
                        o.remove("agent");
                    }
                    one
                })
                .collect();
            obj.insert("models".into(), Value::from(models));
        }
        v
    }
}

/// A call's usage at [`CHARS_PER_TOKEN`] characters a token over the request (messages, tool
/// calls, and `tool_chars`: [`crate::model::schema_chars`] of its tool schemas) and the reply
/// (text and tool calls), rounded up.
pub(crate) fn estimate(request: &ChatRequest, tool_chars: usize, reply: &ModelReply) -> Usage {
    let tokens = |chars: usize| (chars as u64).div_ceil(CHARS_PER_TOKEN);
    let calls = |calls: &[crate::model::ToolCall]| -> usize {
        calls.iter().map(|c| c.name.len() + c.arguments.len()).sum()
    };
    let prompt: usize = request
        .messages
        .iter()
        .map(|m| m.content.as_deref().map_or(0, str::len) + calls(&m.tool_calls))
        .sum::<usize>()
        + tool_chars;
    let completion = reply.text.as_deref().map_or(0, str::len) + calls(&reply.tool_calls);
    Usage {
        prompt_tokens: tokens(prompt),
        completion_tokens: tokens(completion),
        cache_read_tokens: None,
        cache_write_tokens: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ChatMessage;

    #[test]
    fn a_tool_set_counts_the_schema_characters_of_the_tools_it_offers() {
        let compact = |schemas: &[crate::model::ToolSchema]| -> usize {
            schemas
                .iter()
                .map(|t| t.name.len() + t.description.len() + t.parameters.to_string().len())
                .sum()
        };
        let set = crate::tools::ToolSet::builtin();
        assert!(set.schema_chars() > 0, "the built-in tools have schemas");
        assert_eq!(set.schema_chars(), compact(&set.model_schemas()));
        let mut fewer = set.clone();
        fewer.remove("read", crate::tools::Layer::Deny, "test");
        assert_eq!(
            fewer.schema_chars(),
            compact(&fewer.model_schemas()),
            "a set with a tool removed counts its own schemas"
        );
        assert!(fewer.schema_chars() < set.schema_chars());
        let request = ChatRequest {
            tools: set.model_schemas(),
            ..Default::default()
        };
        let tokens = estimate(&request, set.schema_chars(), &ModelReply::default());
        assert_eq!(
            tokens.prompt_tokens,
            (set.schema_chars() as u64).div_ceil(CHARS_PER_TOKEN)
        );
    }

    #[test]
    fn a_call_without_usage_is_estimated_at_four_chars_a_token() {
        let request = ChatRequest {
            model: "m".into(),
            messages: vec![ChatMessage::user("x".repeat(40))],
            tools: Default::default(),
        };
        let reply = ModelReply {
            text: Some("y".repeat(9)),
            ..Default::default()
        };
        let mut usage = TurnUsage::default();
        usage.add_call(&request, 0, &reply);
        assert_eq!((usage.prompt_tokens, usage.completion_tokens), (10, 3));
        assert!(usage.estimated);
        assert_eq!(usage.to_json("a", "p/m", None)["estimated"], true);
    }

    #[test]
    fn cost_charges_cache_reads_and_writes_at_their_prices() {
        let usage = TurnUsage {
            prompt_tokens: 1_000_000,
            completion_tokens: 500_000,
            cache_read_tokens: 400_000,
            cache_write_tokens: 100_000,
            estimated: false,
        };
        let price = Price {
            input_per_mtok: 2.0,
            output_per_mtok: 8.0,
            cache_read_per_mtok: 0.5,
            cache_write_per_mtok: 2.5,
        };
        // 0.5 M uncached × 2 + 0.5 M out × 8 + 0.4 M × 0.5 + 0.1 M × 2.5
        let cost = usage.cost_usd(&price);
        assert!((cost - (1.0 + 4.0 + 0.2 + 0.25)).abs() < 1e-9, "{cost}");
        let v = usage.to_json("a", "p/m", Some(&price));
        assert!(v.get("estimated").is_none());
        assert_eq!(v["model"], "p/m");
    }

    #[test]
    fn each_model_that_answered_is_priced_at_its_own_price() {
        let request = ChatRequest::default();
        let reply = |p, c| ModelReply {
            usage: Some(Usage {
                prompt_tokens: p,
                completion_tokens: c,
                ..Default::default()
            }),
            ..Default::default()
        };
        let mut usage = UsageByModel::default();
        usage.add_call("a/big", &request, 0, &reply(1_000_000, 0));
        usage.add_call("b/small", &request, 0, &reply(1_000_000, 1_000_000));
        usage.add_call("b/small", &request, 0, &reply(1_000_000, 0));
        let price = |input_per_mtok, output_per_mtok| Price {
            input_per_mtok,
            output_per_mtok,
            cache_read_per_mtok: 0.0,
            cache_write_per_mtok: 0.0,
        };
        let prices = BTreeMap::from([
            ("a/big".to_owned(), price(10.0, 0.0)),
            ("b/small".to_owned(), price(1.0, 2.0)),
        ]);
        assert_eq!(usage.total().prompt_tokens, 3_000_000);
        let cost = usage.cost_usd(&prices).unwrap_or(-1.0);
        assert!((cost - (10.0 + 2.0 + 2.0)).abs() < 1e-9, "{cost}");
        let v = usage.to_json("agent", "a/big", &prices);
        assert_eq!(v["model"], "b/small", "the last model that answered: {v}");
        assert_eq!(v["models"][0]["model"], "a/big");
        assert_eq!(v["models"][1]["prompt_tokens"], 2_000_000);
        assert!(v["models"][1].get("agent").is_none());
    }

    #[test]
    fn a_model_the_server_named_is_counted_under_its_name_at_the_requested_price() {
        let reply = ModelReply {
            usage: Some(Usage {
                prompt_tokens: 1_000_000,
                completion_tokens: 0,
                ..Default::default()
            }),
            ..Default::default()
        };
        let mut usage = UsageByModel::default();
        usage.add_call("local/SmolLM2-135M", &ChatRequest::default(), 0, &reply);
        usage.priced_as("local/SmolLM2-135M", "local/m");
        let prices = BTreeMap::from([(
            "local/m".to_owned(),
            Price {
                input_per_mtok: 3.0,
                output_per_mtok: 0.0,
                cache_read_per_mtok: 0.0,
                cache_write_per_mtok: 0.0,
            },
        )]);
        let v = usage.to_json("agent", "local/m", &prices);
        assert_eq!(v["model"], "local/SmolLM2-135M", "{v}");
        assert_eq!(v["models"][0]["model"], "local/SmolLM2-135M");
        assert_eq!(v["cost_usd"], 3.0, "{v}");
    }
}
