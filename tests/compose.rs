//! `docker-compose.yml` and the `Dockerfile` against the binary: no Docker
//! engine runs where the tests do, so the files are read and every flag
//! they pass to `partita` must be one its help lists, the database URL must
//! name the compose file's own PostgreSQL service and credentials, and the
//! volumes must be declared and mounted where the data dir is.

use std::collections::BTreeSet;
use std::process::Command;

use serde_json::Value;

fn read(path: &str) -> String {
    let path = format!("{}/{path}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn compose() -> Value {
    serde_saphyr::from_str(&read("docker-compose.yml")).expect("docker-compose.yml is YAML")
}

/// The long flags `partita <command> --help` lists.
fn flags_of(command: &str) -> BTreeSet<String> {
    let out = Command::new(env!("CARGO_BIN_EXE_partita"))
        .args([command, "--help"])
        .output()
        .expect("the binary runs");
    assert_eq!(out.status.code(), Some(0), "partita {command} --help");
    let help = String::from_utf8_lossy(&out.stdout).into_owned();
    help.split(|c: char| c.is_whitespace() || c == ',' || c == '=')
        .filter(|w| w.starts_with("--") && w.len() > 2)
        .map(str::to_string)
        .collect()
}

/// The flags of an argument list (`--flag value` or `--flag=value`).
fn flags_in(args: &[String]) -> Vec<String> {
    args.iter()
        .filter(|a| a.starts_with("--"))
        .map(|a| a.split('=').next().unwrap_or(a).to_string())
        .collect()
}

/// The value after `flag` in an argument list.
fn value_of<'a>(args: &'a [String], flag: &str) -> Option<&'a str> {
    let at = args.iter().position(|a| a == flag)?;
    args.get(at + 1).map(String::as_str)
}

fn strings(v: &Value, what: &str) -> Vec<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("{what}: not a list: {v}"))
        .iter()
        .map(|x| {
            x.as_str()
                .unwrap_or_else(|| panic!("{what}: not a string: {x}"))
                .to_string()
        })
        .collect()
}

#[test]
fn the_compose_files_partita_runs_flags_the_binary_has() {
    let c = compose();
    let partita = &c["services"]["partita"];
    let command = strings(&partita["command"], "services.partita.command");
    assert_eq!(command.first().map(String::as_str), Some("serve"));
    let known = flags_of("serve");
    for flag in flags_in(&command) {
        assert!(
            known.contains(&flag),
            "docker-compose.yml passes {flag} to partita serve, which has only {known:?}"
        );
    }
    assert!(partita["build"].is_string() || partita["build"].is_object());
}

#[test]
fn the_compose_files_database_url_is_its_own_postgres() {
    let c = compose();
    let pg = &c["services"]["postgres"];
    let partita = &c["services"]["partita"];
    let url = partita["environment"]["DATABASE_URL"]
        .as_str()
        .expect("services.partita.environment.DATABASE_URL");
    let env = &pg["environment"];
    let want = format!(
        "postgres://{}:{}@postgres:5432/{}",
        env["POSTGRES_USER"].as_str().expect("POSTGRES_USER"),
        env["POSTGRES_PASSWORD"]
            .as_str()
            .expect("POSTGRES_PASSWORD"),
        env["POSTGRES_DB"].as_str().expect("POSTGRES_DB"),
    );
    assert_eq!(url, want, "DATABASE_URL must name the postgres service");
    // DATABASE_URL is what --database-url reads from the environment.
    let out = Command::new(env!("CARGO_BIN_EXE_partita"))
        .args(["serve", "--help"])
        .output()
        .expect("the binary runs");
    let help = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        help.contains("env: DATABASE_URL") || help.contains("[env: DATABASE_URL"),
        "partita serve --help does not say --database-url reads DATABASE_URL:\n{help}"
    );
    assert!(
        pg["image"]
            .as_str()
            .is_some_and(|i| i.starts_with("postgres:")),
        "services.postgres.image: {}",
        pg["image"]
    );
    assert!(
        !strings(
            &pg["healthcheck"]["test"],
            "services.postgres.healthcheck.test"
        )
        .is_empty(),
        "the postgres service needs a health check for depends_on"
    );
    assert_eq!(
        partita["depends_on"]["postgres"]["condition"].as_str(),
        Some("service_healthy"),
        "partita must wait for a healthy postgres"
    );
}

#[test]
fn the_compose_files_volumes_are_declared_and_hold_the_data() {
    let c = compose();
    let declared: BTreeSet<&str> = c["volumes"]
        .as_object()
        .expect("top-level volumes")
        .keys()
        .map(String::as_str)
        .collect();
    let mounts = |service: &str| -> Vec<(String, String)> {
        strings(
            &c["services"][service]["volumes"],
            &format!("services.{service}.volumes"),
        )
        .into_iter()
        .map(|m| {
            let (vol, at) = m.split_once(':').expect("volume:path");
            (vol.to_string(), at.to_string())
        })
        .collect()
    };
    for service in ["postgres", "partita"] {
        for (vol, _) in mounts(service) {
            assert!(
                declared.contains(vol.as_str()),
                "services.{service} mounts {vol}, not declared under volumes"
            );
        }
    }
    let command = strings(&c["services"]["partita"]["command"], "command");
    let data_dir = value_of(&command, "--data-dir").expect("--data-dir in the command");
    assert!(
        mounts("partita").iter().any(|(_, at)| at == data_dir),
        "partita's --data-dir {data_dir} is not on a volume: the admin token would be lost"
    );
    assert!(
        mounts("postgres")
            .iter()
            .any(|(_, at)| at == "/var/lib/postgresql/data"),
        "postgres's data is not on a volume"
    );
}

#[test]
fn the_dockerfile_builds_the_binary_and_runs_flags_it_has() {
    let docker = read("Dockerfile");
    let cargo = read("Cargo.toml");
    let rust = cargo
        .lines()
        .find_map(|l| l.strip_prefix("rust-version = "))
        .expect("rust-version in Cargo.toml")
        .trim_matches('"');
    assert!(
        docker.contains(&format!("FROM rust:{rust}")),
        "the Dockerfile's builder is not Rust {rust} (Cargo.toml's rust-version)"
    );
    let last = |prefix: &str| -> Vec<String> {
        let line = docker
            .lines()
            .rev()
            .find_map(|l| l.strip_prefix(prefix))
            .unwrap_or_else(|| panic!("no {prefix}in the Dockerfile"));
        serde_json::from_str(line.trim()).expect("an exec-form JSON list")
    };
    assert_eq!(last("ENTRYPOINT "), vec!["partita".to_string()]);
    let cmd = last("CMD ");
    assert_eq!(cmd.first().map(String::as_str), Some("serve"));
    let known = flags_of("serve");
    for flag in flags_in(&cmd) {
        assert!(
            known.contains(&flag),
            "the Dockerfile passes {flag} to partita serve"
        );
    }
}
