//! Programs that run other programs (`env`, `nice`, `timeout`, `xargs`, `find -exec` …) and
//! programs that are shells: what will actually run behind a wrapper is judged like the wrapper.

/// Shells (and shell-like launchers of code strings) by program name.
const SHELLS: &[&str] = &[
    "sh",
    "bash",
    "zsh",
    "dash",
    "ksh",
    "mksh",
    "pdksh",
    "oksh",
    "ash",
    "csh",
    "tcsh",
    "fish",
    "yash",
    "posh",
    "rbash",
    "elvish",
    "nu",
    "xonsh",
    "pwsh",
    "powershell",
];

/// Launchers whose command is a shell string, or that start a shell or something this module
/// cannot see into: they count as a shell.
const OPAQUE: &[&str] = &[
    "su",
    "script",
    "watch",
    "unshare",
    "nsenter",
    "systemd-run",
    "parallel",
    "ssh",
    "runuser",
    "machinectl",
    "tmux",
    "screen",
    "expect",
    "eval",
    "exec",
    "source",
];

/// Whether `name` (a program's file name) is a shell.
pub(crate) fn is_shell_name(name: &str) -> bool {
    SHELLS.contains(&name)
}

/// The file name part of a program as written (`/bin/sh` → `sh`).
pub(crate) fn base(program: &str) -> &str {
    program.rsplit('/').next().unwrap_or(program)
}

/// What a program runs, as far as its arguments tell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Unwrapped<'a> {
    /// Not a wrapper: it is what runs.
    Program,
    /// A wrapper running these command(s) (each a non-empty argv).
    Wraps(Vec<&'a [String]>),
    /// A wrapper run without a command (`env`, `nice`): nothing else runs.
    Nothing,
    /// Runs a shell or a string through one (`env -S`, `flock -c`, `su`, `watch`, `chroot DIR`).
    Shell(String),
    /// Refused outright, with the reason (`env NAME=value cmd`).
    Refused(String),
    /// An option this module does not understand, so what runs is unknown.
    Unclear(String),
}

/// Option grammar of one wrapper.
struct Spec {
    name: &'static str,
    /// Short options taking a value (`-n 5` or `-n5`).
    short_value: &'static str,
    /// Short flags.
    short_flags: &'static str,
    /// Short options whose value, if any, is attached (`-i{}`).
    short_optional: &'static str,
    /// Long options taking a value (`--adjustment=5` or `--adjustment 5`).
    long_value: &'static [&'static str],
    /// Long flags (a `=value` is tolerated).
    long_flags: &'static [&'static str],
    /// Options that make it run a shell string.
    shell_opts: &'static [&'static str],
    /// Positional arguments before the command (timeout's DURATION, chroot's DIR).
    positionals: usize,
    /// `-10` style numeric options (nice).
    numeric: bool,
    /// What running it without a command does.
    bare: Bare,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Bare {
    Nothing,
    Shell,
}

const fn spec(name: &'static str) -> Spec {
    Spec {
        name,
        short_value: "",
        short_flags: "",
        short_optional: "",
        long_value: &[],
        long_flags: &[],
        shell_opts: &[],
        positionals: 0,
        numeric: false,
        bare: Bare::Nothing,
    }
}

const WRAPPERS: &[Spec] = &[
    // No -C/--chdir: the program behind it would run (and be found) somewhere other than the
    // workspace the judge looked in.
    Spec {
        short_value: "u",
        short_flags: "i0v",
        long_value: &["--unset"],
        long_flags: &[
            "--ignore-environment",
            "--null",
            "--debug",
            "--block-signal",
            "--default-signal",
            "--ignore-signal",
            "--list-signal-handling",
        ],
        shell_opts: &["-S", "--split-string"],
        ..spec("env")
    },
    Spec {
        short_value: "n",
        long_value: &["--adjustment"],
        numeric: true,
        ..spec("nice")
    },
    spec("nohup"),
    Spec {
        short_value: "sk",
        short_flags: "vfp",
        long_value: &["--signal", "--kill-after"],
        long_flags: &["--foreground", "--preserve-status", "--verbose"],
        positionals: 1,
        ..spec("timeout")
    },
    Spec {
        short_value: "ioe",
        long_value: &["--input", "--output", "--error"],
        ..spec("stdbuf")
    },
    // No -a/--arg-file: arguments read from a file (one the agent can write) would reach the
    // command unjudged.
    Spec {
        short_value: "dEILnPs",
        short_flags: "0oprtx",
        short_optional: "eil",
        long_value: &[
            "--delimiter",
            "--max-lines",
            "--max-args",
            "--max-procs",
            "--max-chars",
            "--process-slot-var",
        ],
        long_flags: &[
            "--null",
            "--open-tty",
            "--interactive",
            "--no-run-if-empty",
            "--verbose",
            "--exit",
            "--eof",
            "--replace",
        ],
        ..spec("xargs")
    },
    Spec {
        short_flags: "cfw",
        long_flags: &["--ctty", "--fork", "--wait"],
        ..spec("setsid")
    },
    Spec {
        short_value: "cnpPu",
        short_flags: "t",
        long_value: &["--class", "--classdata", "--pid", "--pgid", "--uid"],
        long_flags: &["--ignore"],
        ..spec("ionice")
    },
    Spec {
        short_flags: "acp",
        long_flags: &["--all-tasks", "--cpu-list", "--pid"],
        positionals: 1,
        ..spec("taskset")
    },
    Spec {
        short_value: "TPD",
        short_flags: "abdefimoprRv",
        positionals: 1,
        ..spec("chrt")
    },
    Spec {
        short_value: "fo",
        short_flags: "apqv",
        long_value: &["--format", "--output"],
        long_flags: &["--append", "--portability", "--quiet", "--verbose"],
        ..spec("time")
    },
    spec("busybox"),
    Spec {
        short_value: "ugCDhprtUT",
        short_flags: "AbEHkKnPSBNl",
        shell_opts: &["-s", "-i", "--shell", "--login"],
        bare: Bare::Shell,
        ..spec("sudo")
    },
    Spec {
        short_value: "uC",
        short_flags: "nL",
        shell_opts: &["-s"],
        bare: Bare::Shell,
        ..spec("doas")
    },
    Spec {
        long_value: &["--user"],
        long_flags: &["--disable-internal-agent", "--keep-cwd"],
        bare: Bare::Shell,
        ..spec("pkexec")
    },
    Spec {
        long_value: &["--userspec", "--groups"],
        long_flags: &["--skip-chdir"],
        positionals: 1,
        bare: Bare::Shell,
        ..spec("chroot")
    },
    Spec {
        short_value: "wEo",
        short_flags: "sxunFe",
        long_value: &["--timeout", "--conflict-exit-code"],
        long_flags: &[
            "--shared",
            "--exclusive",
            "--unlock",
            "--nonblock",
            "--close",
            "--no-fork",
            "--verbose",
        ],
        shell_opts: &["-c", "--command"],
        positionals: 1,
        ..spec("flock")
    },
];

/// What `argv` runs besides its own program (`argv` is non-empty).
pub(crate) fn unwrap(argv: &[String]) -> Unwrapped<'_> {
    let name = base(&argv[0]);
    if OPAQUE.contains(&name) {
        return Unwrapped::Shell(format!("{name} runs commands through a shell"));
    }
    if name == "find" {
        return find_exec(argv);
    }
    match WRAPPERS.iter().find(|w| w.name == name) {
        Some(spec) => options(spec, argv),
        None => Unwrapped::Program,
    }
}

fn options<'a>(spec: &Spec, argv: &'a [String]) -> Unwrapped<'a> {
    let name = spec.name;
    let shell = |opt: &str| Unwrapped::Shell(format!("{name} {opt} runs a shell"));
    let mut i = 1;
    while let Some(arg) = argv.get(i) {
        if arg == "--" {
            i += 1;
            break;
        }
        if arg.starts_with("--") {
            let (key, value) = arg
                .split_once('=')
                .map_or((arg.as_str(), None), |(k, v)| (k, Some(v)));
            if spec.shell_opts.contains(&key) {
                return shell(key);
            }
            if spec.long_value.contains(&key) {
                i += if value.is_some() { 1 } else { 2 };
            } else if spec.long_flags.contains(&key) {
                i += 1;
            } else {
                return Unwrapped::Unclear(format!("{name} option {key}"));
            }
            continue;
        }
        if arg.len() > 1 && arg.starts_with('-') {
            if spec.numeric && arg[1..].chars().all(|c| c.is_ascii_digit()) {
                i += 1;
                continue;
            }
            let cluster: Vec<char> = arg[1..].chars().collect();
            let mut takes_next = false;
            for (k, c) in cluster.iter().enumerate() {
                let opt = format!("-{c}");
                if spec.shell_opts.contains(&opt.as_str()) {
                    return shell(&opt);
                }
                if spec.short_optional.contains(*c) {
                    break;
                }
                if spec.short_value.contains(*c) {
                    takes_next = k + 1 == cluster.len();
                    break;
                }
                if !spec.short_flags.contains(*c) {
                    return Unwrapped::Unclear(format!("{name} option {opt}"));
                }
            }
            i += if takes_next { 2 } else { 1 };
            continue;
        }
        break;
    }
    if name == "env" {
        if let Some(a) = argv.get(i).filter(|a| is_assignment(a)) {
            let var = a.split('=').next().unwrap_or_default();
            return Unwrapped::Refused(format!(
                "env sets {var} for the command; extra variables come only from exec.env"
            ));
        }
    }
    i += spec.positionals;
    match argv.get(i..) {
        Some(rest) if !rest.is_empty() => Unwrapped::Wraps(vec![rest]),
        _ if spec.bare == Bare::Shell => {
            Unwrapped::Shell(format!("{name} without a command starts a shell"))
        }
        _ => Unwrapped::Nothing,
    }
}

/// `find … -exec CMD … ;` (also `-execdir`, `-ok`, `-okdir`, and `+` endings).
fn find_exec(argv: &[String]) -> Unwrapped<'_> {
    let mut inner = Vec::new();
    let mut i = 1;
    while i < argv.len() {
        if matches!(argv[i].as_str(), "-exec" | "-execdir" | "-ok" | "-okdir") {
            let in_dir = argv[i].ends_with("dir");
            let start = i + 1;
            let end = (start..argv.len())
                .find(|&j| argv[j] == ";" || argv[j] == "+")
                .unwrap_or(argv.len());
            // -execdir runs it from each match's folder: `./x` there is not the `./x` judged.
            if in_dir
                && argv
                    .get(start)
                    .is_some_and(|p| p.contains('/') && !p.starts_with('/'))
            {
                return Unwrapped::Unclear(format!(
                    "find {} with a relative program path",
                    argv[i]
                ));
            }
            if end > start {
                inner.push(&argv[start..end]);
            }
            i = end + 1;
        } else {
            i += 1;
        }
    }
    if inner.is_empty() {
        Unwrapped::Program
    } else {
        Unwrapped::Wraps(inner)
    }
}

/// `NAME=value`, as a shell would take it for a variable assignment.
pub(crate) fn is_assignment(word: &str) -> bool {
    word.split_once('=').is_some_and(|(name, _)| {
        !name.is_empty()
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !name.starts_with(|c: char| c.is_ascii_digit())
    })
}
