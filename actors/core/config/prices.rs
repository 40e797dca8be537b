//! The `[prices]` section of `clawbus.toml`: what a model's tokens cost, to put a price on usage.
//!
//! ```toml
//! [prices."openai/gpt-4.1-mini"]
//! input_per_mtok = 0.40        # USD per million uncached prompt tokens (required)
//! output_per_mtok = 1.60       # USD per million completion tokens (required)
//! cache_read_per_mtok = 0.10   # USD per million prompt tokens read from the cache (default: input)
//! cache_write_per_mtok = 0.50  # USD per million prompt tokens written to the cache (default: input)
//! ```
//!
//! The key is `provider/model` and its provider must be declared (or `scripted`); every price is
//! a number ≥ 0.

use super::Problem;
use super::span::Source;
use super::validate::{Known, resolve_model};
use serde::Deserialize;
use std::collections::BTreeMap;
use toml::Spanned;

/// `[prices."<provider>/<model>"]`, as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct PriceFile {
    pub input_per_mtok: Option<Spanned<f64>>,
    pub output_per_mtok: Option<Spanned<f64>>,
    pub cache_read_per_mtok: Option<Spanned<f64>>,
    pub cache_write_per_mtok: Option<Spanned<f64>>,
}

/// `[prices]`: model keys to their prices.
pub(super) type PricesFile = BTreeMap<Spanned<String>, Spanned<PriceFile>>;

/// The validated price of one model, in US dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Price {
    /// Per million prompt tokens that were neither read from nor written to the cache.
    pub input_per_mtok: f64,
    /// Per million completion tokens.
    pub output_per_mtok: f64,
    /// Per million prompt tokens read from the provider's cache.
    pub cache_read_per_mtok: f64,
    /// Per million prompt tokens written to the provider's cache.
    pub cache_write_per_mtok: f64,
}

/// Validates `[prices]`, pushing one problem per bad entry; keys are `provider/model`.
pub(super) fn prices(
    src: &Source,
    file: &PricesFile,
    known: &Known,
    problems: &mut Vec<Problem>,
) -> BTreeMap<String, Price> {
    let mut out = BTreeMap::new();
    for (key, entry) in file {
        let section = format!("prices.{}", key.get_ref());
        let model = match resolve_model(key.get_ref(), known) {
            Ok(m) => m,
            Err(message) => {
                problems.push(src.at(Some(key.span()), section, message));
                continue;
            }
        };
        let f = entry.get_ref();
        let before = problems.len();
        let mut number = |value: &Option<Spanned<f64>>, name: &str, required: bool| {
            let field = format!("{section}.{name}");
            match value {
                None if required => {
                    problems.push(src.at(
                        Some(entry.span()),
                        field,
                        format!("missing {name} (expected US dollars per million tokens, e.g. {name} = 0.4)"),
                    ));
                    None
                }
                None => None,
                Some(v) if v.get_ref().is_finite() && *v.get_ref() >= 0.0 => Some(*v.get_ref()),
                Some(v) => {
                    problems.push(src.at(
                        Some(v.span()),
                        field,
                        format!(
                            "price {} is not allowed (expected a number ≥ 0, in US dollars per million tokens)",
                            v.get_ref()
                        ),
                    ));
                    None
                }
            }
        };
        let input = number(&f.input_per_mtok, "input_per_mtok", true);
        let output = number(&f.output_per_mtok, "output_per_mtok", true);
        let cache_read = number(&f.cache_read_per_mtok, "cache_read_per_mtok", false);
        let cache_write = number(&f.cache_write_per_mtok, "cache_write_per_mtok", false);
        if problems.len() > before {
            continue;
        }
        let input = input.unwrap_or(0.0);
        out.insert(
            model.to_string(),
            Price {
                input_per_mtok: input,
                output_per_mtok: output.unwrap_or(0.0),
                cache_read_per_mtok: cache_read.unwrap_or(input),
                cache_write_per_mtok: cache_write.unwrap_or(input),
            },
        );
    }
    out
}
