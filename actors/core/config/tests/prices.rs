//! `[prices]` of `clawbus.toml`: numbers ≥ 0 for models of known providers, placed errors.

use super::Fixture;
use crate::config::{Price, load};

#[test]
fn a_price_is_loaded_with_cache_prices_defaulting_to_input() {
    let fx = Fixture::new();
    fx.write(
        "clawbus.toml",
        "[providers.mock]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\n\n[prices.\"mock/m\"]\ninput_per_mtok = 2\noutput_per_mtok = 8.5\ncache_read_per_mtok = 0.5\n",
    );
    let config = load(&fx.opts()).unwrap();
    assert_eq!(
        config.prices.get("mock/m"),
        Some(&Price {
            input_per_mtok: 2.0,
            output_per_mtok: 8.5,
            cache_read_per_mtok: 0.5,
            cache_write_per_mtok: 2.0,
        })
    );
}

#[test]
fn a_bad_price_is_a_placed_check_error() {
    let fx = Fixture::new();
    fx.write(
        "clawbus.toml",
        "[prices.\"opnai/gpt\"]\ninput_per_mtok = 1\noutput_per_mtok = 1\n\n[prices.\"scripted/echo\"]\ninput_per_mtok = -1\noutput_per_mtok = 1\n\n[prices.\"scripted/x\"]\noutput_per_mtok = 1\n",
    );
    let report = fx.errors(&fx.opts());
    assert_eq!(
        fx.lines(&report),
        [
            "clawbus.toml:1:9: field \"prices.opnai/gpt\": unknown provider \"opnai\" (expected one of: scripted)",
            "clawbus.toml:6:18: field \"prices.scripted/echo.input_per_mtok\": price -1 is not allowed (expected a number ≥ 0, in US dollars per million tokens)",
            "clawbus.toml:9:1: field \"prices.scripted/x.input_per_mtok\": missing input_per_mtok (expected US dollars per million tokens, e.g. input_per_mtok = 0.4)",
        ]
    );
}

#[test]
fn a_price_that_is_not_a_number_is_placed() {
    let fx = Fixture::new();
    fx.write(
        "clawbus.toml",
        "[prices.\"scripted/echo\"]\ninput_per_mtok = \"cheap\"\noutput_per_mtok = 1\n",
    );
    let report = fx.errors(&fx.opts());
    let lines = fx.lines(&report);
    assert!(
        lines.len() == 1 && lines[0].starts_with("clawbus.toml:2:"),
        "{lines:?}"
    );
}
