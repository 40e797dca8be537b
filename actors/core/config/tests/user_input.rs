//! Bad input a person writes, and the problems it must produce: all of them, each placed.

use super::*;

#[test]
fn a_bad_array_of_tables_entry_does_not_hide_the_rest_of_the_file() {
    let fx = Fixture::new();
    fx.write(
        "agents.d/a.toml",
        "[[bindings]]\nchannel = \"tg\"\nchat_type = 3\n[[bindings]]\npeer = \"x\"\n[[bindings]]\nchannel = \"Bad Name\"\n[limits]\nmax_iterations = 0\ncolour = 1\n",
    );
    let report = fx.errors(&fx.opts());
    assert_eq!(
        fx.lines(&report),
        [
            "agents.d/a.toml:3:13: field \"bindings[0].chat_type\": invalid type: integer \"3\" (expected a string)",
            "agents.d/a.toml:4:1: field \"bindings[1].channel\": missing (expected a value for this required field)",
            "agents.d/a.toml:7:11: field \"bindings[2].channel\": invalid channel name \"Bad Name\" (expected lowercase letters, digits, '-' or '_')",
            "agents.d/a.toml:9:18: field \"limits.max_iterations\": 0 is out of range (expected 1 to 200)",
            "agents.d/a.toml:10:1: field \"limits.colour\": unknown field \"colour\" (expected one of: max_iterations, turn_timeout, tool_result_max_chars, max_attempts, retry_backoff, retry_backoff_max)",
        ]
    );
}

#[test]
fn array_elements_of_the_wrong_type_are_named_by_their_index_in_the_file() {
    let fx = Fixture::new();
    fx.write(
        "agents.d/a.toml",
        "[tools]\ndeny = [1, \"exec\", 2]\nallow = [\"nope\"]\n",
    );
    let report = fx.errors(&fx.opts());
    assert_eq!(
        fx.lines(&report),
        [
            "agents.d/a.toml:2:9: field \"tools.deny[0]\": invalid type: integer \"1\" (expected a string)",
            "agents.d/a.toml:2:20: field \"tools.deny[2]\": invalid type: integer \"2\" (expected a string)",
            "agents.d/a.toml:3:10: field \"tools.allow\": unknown tool \"nope\" (expected one of: read, write, edit, exec, web_fetch, web_search, memory_search, memory_get, sessions_list, sessions_history, sessions_send, sessions_spawn, agent_call, cron, message, flow_run, browser, or a group: group:fs, group:runtime, group:web, group:memory, group:sessions, group:messaging, group:agents, group:automation, group:ui, group:mcp, group:mcp:<server>, or an MCP tool mcp__<server>__<tool>)",
        ]
    );
}

#[test]
fn exec_allow_table_mistakes_read_like_every_other_problem() {
    let fx = Fixture::new();
    fx.write(
        "agents.d/a.toml",
        "[exec]\nallow = [{ program = \"git\", bogus = 1 }, { program = \"git\", args = \"(\" }]\n",
    );
    let report = fx.errors(&fx.opts());
    assert_eq!(
        fx.lines(&report),
        [
            "agents.d/a.toml:2:10: field \"exec.allow[0]\": unknown field \"bogus\" (expected one of: program, command, args, deny_args, shell)",
            "agents.d/a.toml:2:42: field \"exec.allow[1]\": args: invalid regex \"(\": unclosed group (expected a regular expression matched against the arguments joined by spaces, e.g. \"^status( |$)\")",
        ]
    );
}

#[test]
fn a_duration_written_as_a_number_asks_for_a_duration_string() {
    let fx = Fixture::new();
    fx.write("clawbus.toml", "[web]\ntimeout = 30\n")
        .write("agents.d/a.toml", "[limits]\nturn_timeout = 600\n");
    let report = fx.errors(&fx.opts());
    let expected = "(expected a duration string such as \"30s\", \"500ms\" or \"1h30m\")";
    assert_eq!(
        fx.lines(&report),
        [
            format!(
                "clawbus.toml:2:11: field \"web.timeout\": invalid type: integer \"30\" {expected}"
            ),
            format!(
                "agents.d/a.toml:2:16: field \"limits.turn_timeout\": invalid type: integer \"600\" {expected}"
            ),
        ]
    );
}

#[test]
fn a_private_host_with_a_port_is_refused_even_the_default_port() {
    let fx = Fixture::new();
    fx.write(
        "clawbus.toml",
        "[web]\nallow_private_hosts = [\"wiki.internal:80\", \"[::1]:443\", \"[::1]\", \"wiki.internal\"]\n",
    );
    let report = fx.errors(&fx.opts());
    let fields: Vec<&str> = report.problems().map(|p| p.field.as_str()).collect();
    assert_eq!(
        fields,
        ["web.allow_private_hosts[0]", "web.allow_private_hosts[1]"]
    );
    fx.write(
        "clawbus.toml",
        "[web]\nallow_private_hosts = [\"[::1]\", \"wiki.internal\"]\n",
    );
    let config = load(&fx.opts()).unwrap();
    assert_eq!(config.web.allow_private_hosts, ["[::1]", "wiki.internal"]);
}

#[test]
fn skills_folders_named_in_the_file_must_exist() {
    let fx = Fixture::new();
    fs::create_dir(fx.dir.path().join("team-skills")).unwrap();
    fx.write(
        "clawbus.toml",
        "[skills]\nbundled_dir = \"skilz\"\nextra_dirs = [\"team-skills\", \"gone\"]\n",
    );
    let report = fx.errors(&fx.opts());
    assert_eq!(
        fx.lines(&report),
        [
            "clawbus.toml:2:15: field \"skills.bundled_dir\": folder skilz not found (expected an existing folder of <name>/SKILL.md skills)",
            "clawbus.toml:3:30: field \"skills.extra_dirs[1]\": folder gone not found (expected an existing folder of <name>/SKILL.md skills)",
        ]
    );
    fx.write("clawbus.toml", "[skills]\nextra_dirs = [\"team-skills\"]\n");
    let config = load(&fx.opts()).expect("an existing folder, and the default bundled one absent");
    assert_eq!(
        config.skills.extra_dirs,
        [fx.dir.path().join("team-skills")]
    );
}

#[test]
fn a_channel_section_must_be_named_like_a_binding_channel() {
    let fx = Fixture::new();
    fx.write(
        "clawbus.toml",
        "[channels.telegram]\ndeny_tools = [\"exec\"]\n[channels.\"Tele Gram\"]\ndeny_tools = []\n",
    );
    let report = fx.errors(&fx.opts());
    assert_eq!(
        fx.lines(&report),
        [
            "clawbus.toml:3:11: field \"channels.Tele Gram\": invalid channel name \"Tele Gram\" (expected lowercase letters, digits, '-' or '_', as in [[bindings]] channel)"
        ]
    );
}

#[test]
fn telegram_polling_keys_are_checked_and_placed() {
    let fx = Fixture::new();
    fx.write(
        "clawbus.toml",
        "[channels.telegram]\ntoken_env = \"123:secret-token\"\nbase_url = \"ftp://x\"\nallow_chats = [42]\npoll_timeout = \"10m\"\ndeny_tools = [\"shell\"]\n[channels.slack]\nallow_chats = [1]\n[webhooks.ci]\nagent = \"a\"\nsecret_env = \"CI_SECRET\"\ndeliver_url = \"not a url\"\n[delivery]\nmax_attempts = 0\n",
    );
    fx.write("agents.d/a.toml", "");
    let report = fx.errors(&fx.opts());
    let lines = fx.lines(&report);
    let expected = [
        "clawbus.toml:2:13: field \"channels.telegram.token_env\": not an environment variable name",
        "clawbus.toml:3:12: field \"channels.telegram.base_url\": \"ftp://x\" is not an http(s) URL",
        "clawbus.toml:5:16: field \"channels.telegram.poll_timeout\": 600s is too long (expected at most 120s)",
        "clawbus.toml:6:15: field \"channels.telegram.deny_tools\": unknown tool \"shell\"",
        "clawbus.toml:8:15: field \"channels.slack\": token_env, base_url, allow_chats and poll_timeout belong to [channels.telegram] only",
        "clawbus.toml:12:15: field \"webhooks.ci.deliver_url\": \"not a url\" is not an http(s) URL",
        "clawbus.toml:14:16: field \"delivery.max_attempts\": 0 is out of range (expected 1 to 20)",
    ];
    assert_eq!(lines.len(), expected.len(), "{lines:#?}");
    for (line, want) in lines.iter().zip(expected) {
        assert!(
            line.starts_with(want),
            "{line}\n  should start with\n{want}"
        );
    }
    assert!(
        !lines.concat().contains("secret-token"),
        "a token is never echoed"
    );
}

#[test]
fn a_telegram_section_with_a_token_polls_with_defaults() {
    let fx = Fixture::new();
    fx.write(
        "clawbus.toml",
        "[channels.telegram]\ntoken_env = \"TG_TOKEN\"\nallow_chats = [42, -100]\n",
    );
    let config = crate::config::load(&fx.opts()).unwrap();
    let tg = config.channels["telegram"].telegram.clone().unwrap();
    assert_eq!(tg.base_url, crate::config::DEFAULT_TELEGRAM_BASE_URL);
    assert_eq!(tg.allow_chats, [42, -100]);
    assert_eq!(tg.poll_timeout, std::time::Duration::from_secs(30));
    assert_eq!(config.delivery, crate::config::DeliveryDef::default());
}
