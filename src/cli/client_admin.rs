//! The client's report and administration commands (Go:
//! `go/cmd/partita/client_admin.go`): `report usage|chargeback` and
//! `admin teams|projects|users|tokens …`, with the Go build's flags and
//! output, and what the Rust server adds: `--month` and the
//! `business_unit` group of the reports, a team's `--business-unit`,
//! `admin users update` (role, team, disable), a token's `--expires-at`,
//! and `admin audit`.

use std::io::Write;

use chrono::{DateTime, Utc};
use clap::Subcommand;
use partita_engine::numfmt::format_g;
use serde_json::Value;

use super::client::{ClientArgs, connect, or_dash, rfc3339, table};
use super::{split_list, usage_error};
use crate::api;
use crate::client::{query, report};
use crate::output::write_json;

/// `partita report usage|chargeback`.
#[derive(Debug, Clone, clap::Args)]
#[command(subcommand_required = true, arg_required_else_help = true)]
pub struct ReportCommand {
    #[command(subcommand)]
    pub command: ReportKind,
}

/// The two reports.
#[derive(Debug, Clone, Subcommand)]
pub enum ReportKind {
    /// GPU-hours and cost over a period, by team (or --group-by)
    Usage(ReportArgs),
    /// cost over a period, by business unit, team and project (or --group-by)
    Chargeback(ReportArgs),
}

impl ReportKind {
    fn name(&self) -> &'static str {
        match self {
            ReportKind::Usage(_) => "usage",
            ReportKind::Chargeback(_) => "chargeback",
        }
    }

    pub fn error_prefix(&self) -> &'static str {
        match self {
            ReportKind::Usage(_) => "report usage",
            ReportKind::Chargeback(_) => "report chargeback",
        }
    }
}

#[derive(Debug, Clone, clap::Args)]
pub struct ReportArgs {
    #[command(flatten)]
    pub client: ClientArgs,
    /// a calendar month, YYYY-MM (UTC, cluster time); not with --from or --to
    #[arg(long, default_value = "", hide_default_value = true)]
    pub month: String,
    /// start (RFC 3339, cluster time; default the start of --to's month)
    #[arg(long, default_value = "", hide_default_value = true)]
    pub from: String,
    /// end, exclusive (RFC 3339, cluster time; default now)
    #[arg(long, default_value = "", hide_default_value = true)]
    pub to: String,
    /// business_unit, team, project, user, model, tier, class (comma-separated)
    #[arg(long, default_value = "", hide_default_value = true)]
    pub group_by: String,
    /// only this team (admins and finance; others see their own)
    #[arg(long, default_value = "", hide_default_value = true)]
    pub team: String,
    /// table, csv or json
    #[arg(long, default_value = "table")]
    pub format: String,
}

pub fn report(cmd: &ReportCommand, stdout: &mut dyn Write) -> anyhow::Result<()> {
    let kind = cmd.command.name();
    let (ReportKind::Usage(args) | ReportKind::Chargeback(args)) = &cmd.command;
    let format = if args.client.json {
        "json"
    } else {
        args.format.as_str()
    };
    if !matches!(format, "table" | "csv" | "json") {
        return Err(usage_error(format!(
            "--format {format:?}: want table, csv or json"
        )));
    }
    let client = connect(&args.client)?;
    let mut pairs = vec![
        ("month", args.month.as_str()),
        ("from", &args.from),
        ("to", &args.to),
        ("group_by", &args.group_by),
        ("team", &args.team),
    ];
    if format == "csv" {
        pairs.push(("format", "csv"));
        let path = format!("{}/reports/{kind}{}", api::PREFIX, query(&pairs));
        stdout.write_all(&client.get_raw(&path)?)?;
        return Ok(());
    }
    let q = query(&pairs);
    if format == "json" {
        let answer: Value = client.report(kind, &q)?;
        return write_json(stdout, &answer);
    }
    let r: report::Report = client.report(kind, &q)?;
    write_report(&r, stdout)
}

/// A report as Go's table: the period, then a row per group and the
/// total. Group keys the server left empty (a team without a business
/// unit) print as "-".
pub fn write_report(r: &report::Report, stdout: &mut dyn Write) -> anyhow::Result<()> {
    writeln!(
        stdout,
        "{} to {}, {} (prices: {})\n",
        rfc3339(r.from),
        rfc3339(r.to),
        r.currency,
        r.prices
    )?;
    let mut tw = table(stdout);
    writeln!(
        tw,
        "{}\tGPU-HOURS\tCOST\tHOLDS",
        r.group_by.join("\t").to_uppercase()
    )?;
    for row in &r.rows {
        let cols: Vec<&str> = r
            .group_by
            .iter()
            .map(|g| or_dash(row.key(g).unwrap_or("")))
            .collect();
        writeln!(
            tw,
            "{}\t{}\t{}\t{}",
            cols.join("\t"),
            row.gpu_hours,
            row.cost,
            row.holds
        )?;
    }
    // The total's first column says TOTAL; its other key columns are empty.
    let mut cols = vec!["TOTAL"];
    cols.resize(r.group_by.len().max(1), "");
    writeln!(
        tw,
        "{}\t{}\t{}\t{}",
        cols.join("\t"),
        r.total.gpu_hours,
        r.total.cost,
        r.total.holds
    )?;
    tw.flush()?;
    Ok(())
}

/// `partita admin <noun> <verb>`.
#[derive(Debug, Clone, clap::Args)]
#[command(subcommand_required = true, arg_required_else_help = true)]
pub struct AdminCommand {
    #[command(subcommand)]
    pub command: AdminNoun,
}

#[derive(Debug, Clone, Subcommand)]
pub enum AdminNoun {
    /// teams: list, create, update (quotas, classes, business unit)
    #[command(subcommand)]
    Teams(TeamsVerb),
    /// a team's projects: list, create
    #[command(subcommand)]
    Projects(ProjectsVerb),
    /// users: list, create, update (role, team, disable)
    #[command(subcommand)]
    Users(UsersVerb),
    /// API tokens: list, create (prints the secret once), revoke
    #[command(subcommand)]
    Tokens(TokensVerb),
    /// the audit log, newest first
    Audit(AuditArgs),
}

#[derive(Debug, Clone, Subcommand)]
pub enum TeamsVerb {
    /// every team with its quota
    List(ListArgs),
    /// a new team (prints it as JSON)
    Create(TeamArgs),
    /// change a team's quota, weight, classes or business unit (prints it as JSON)
    Update(TeamArgs),
}

#[derive(Debug, Clone, Subcommand)]
pub enum ProjectsVerb {
    /// a team's projects
    List(ProjectsListArgs),
    /// a new project of a team
    Create(ProjectCreateArgs),
}

#[derive(Debug, Clone, Subcommand)]
pub enum UsersVerb {
    /// every user with their role and team
    List(ListArgs),
    /// a new user
    Create(UserCreateArgs),
    /// change a user's role or team, or disable (enable) them
    Update(UserUpdateArgs),
}

#[derive(Debug, Clone, Subcommand)]
pub enum TokensVerb {
    /// every token, without secrets
    List(ListArgs),
    /// a new token for a user: the secret is printed once, on stdout
    Create(TokenCreateArgs),
    /// revoke a token: it is refused from the next request on
    Revoke(TokenRevokeArgs),
}

impl AdminNoun {
    pub fn error_prefix(&self) -> &'static str {
        match self {
            AdminNoun::Teams(TeamsVerb::List(_)) => "admin teams list",
            AdminNoun::Teams(TeamsVerb::Create(_)) => "admin teams create",
            AdminNoun::Teams(TeamsVerb::Update(_)) => "admin teams update",
            AdminNoun::Projects(ProjectsVerb::List(_)) => "admin projects list",
            AdminNoun::Projects(ProjectsVerb::Create(_)) => "admin projects create",
            AdminNoun::Users(UsersVerb::List(_)) => "admin users list",
            AdminNoun::Users(UsersVerb::Create(_)) => "admin users create",
            AdminNoun::Users(UsersVerb::Update(_)) => "admin users update",
            AdminNoun::Tokens(TokensVerb::List(_)) => "admin tokens list",
            AdminNoun::Tokens(TokensVerb::Create(_)) => "admin tokens create",
            AdminNoun::Tokens(TokensVerb::Revoke(_)) => "admin tokens revoke",
            AdminNoun::Audit(_) => "admin audit",
        }
    }
}

/// A listing's flags: the client's only.
#[derive(Debug, Clone, clap::Args)]
pub struct ListArgs {
    #[command(flatten)]
    pub client: ClientArgs,
}

#[derive(Debug, Clone, clap::Args)]
pub struct TeamArgs {
    #[command(flatten)]
    pub client: ClientArgs,
    /// the team's name
    #[arg(value_name = "NAME")]
    pub name: String,
    /// guaranteed GPUs
    #[arg(long, value_name = "GPUS", allow_negative_numbers = true)]
    pub guarantee: Option<f64>,
    /// most GPUs the team may hold (default: the cluster)
    #[arg(long, value_name = "GPUS", allow_negative_numbers = true)]
    pub burst: Option<f64>,
    /// share of what guarantees leave over (default 1)
    #[arg(long, value_name = "W", allow_negative_numbers = true)]
    pub weight: Option<f64>,
    /// allowed classes, comma-separated
    #[arg(long, default_value = "", hide_default_value = true)]
    pub classes: String,
    /// the cost centre finance allocates the team's spend to (created when new; "" removes it)
    #[arg(long, value_name = "NAME")]
    pub business_unit: Option<String>,
}

impl TeamArgs {
    fn request(&self) -> api::TeamRequest {
        let classes = split_list(&self.classes);
        api::TeamRequest {
            name: String::new(),
            guaranteed_gpus: self.guarantee,
            burst_gpus: self.burst,
            weight: self.weight,
            classes: (!classes.is_empty()).then_some(classes),
            business_unit: self.business_unit.clone(),
        }
    }
}

#[derive(Debug, Clone, clap::Args)]
pub struct ProjectsListArgs {
    #[command(flatten)]
    pub client: ClientArgs,
    /// the team
    #[arg(value_name = "TEAM")]
    pub team: String,
}

#[derive(Debug, Clone, clap::Args)]
pub struct ProjectCreateArgs {
    #[command(flatten)]
    pub client: ClientArgs,
    /// the team
    #[arg(value_name = "TEAM")]
    pub team: String,
    /// the project's name
    #[arg(value_name = "NAME")]
    pub name: String,
}

#[derive(Debug, Clone, clap::Args)]
pub struct UserCreateArgs {
    #[command(flatten)]
    pub client: ClientArgs,
    /// the user's name
    #[arg(value_name = "NAME")]
    pub name: String,
    /// admin, lead, member, viewer or finance
    #[arg(long, default_value = "", hide_default_value = true)]
    pub role: String,
    /// the user's team (all roles but admin and finance)
    #[arg(long, default_value = "", hide_default_value = true)]
    pub team: String,
}

#[derive(Debug, Clone, clap::Args)]
pub struct UserUpdateArgs {
    #[command(flatten)]
    pub client: ClientArgs,
    /// the user's name
    #[arg(value_name = "NAME")]
    pub name: String,
    /// a new role: admin, lead, member, viewer or finance
    #[arg(long)]
    pub role: Option<String>,
    /// a new team ("" for none: admin and finance)
    #[arg(long)]
    pub team: Option<String>,
    /// refuse the user's tokens from now on
    #[arg(long, conflicts_with = "enable")]
    pub disable: bool,
    /// accept the user's tokens again
    #[arg(long)]
    pub enable: bool,
}

#[derive(Debug, Clone, clap::Args)]
pub struct TokenCreateArgs {
    #[command(flatten)]
    pub client: ClientArgs,
    /// the user the token is for
    #[arg(value_name = "USER")]
    pub user: String,
    /// what the token is for
    #[arg(long, default_value = "", hide_default_value = true)]
    pub description: String,
    /// when it stops working, RFC 3339 (default: 90 days from now)
    #[arg(long, value_name = "TIME", value_parser = parse_time)]
    pub expires_at: Option<DateTime<Utc>>,
}

fn parse_time(s: &str) -> Result<DateTime<Utc>, String> {
    DateTime::parse_from_rfc3339(s)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| format!("not an RFC 3339 time (2026-12-31T00:00:00Z): {e}"))
}

#[derive(Debug, Clone, clap::Args)]
pub struct TokenRevokeArgs {
    #[command(flatten)]
    pub client: ClientArgs,
    /// the token's ID (admin tokens list)
    #[arg(value_name = "TOKEN-ID")]
    pub id: String,
}

#[derive(Debug, Clone, clap::Args)]
pub struct AuditArgs {
    #[command(flatten)]
    pub client: ClientArgs,
    /// at most this many entries
    #[arg(long, default_value_t = 50, allow_negative_numbers = true)]
    pub limit: i64,
}

pub fn admin(
    cmd: &AdminCommand,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> anyhow::Result<()> {
    match &cmd.command {
        AdminNoun::Teams(TeamsVerb::List(a)) => teams_list(a, stdout),
        AdminNoun::Teams(TeamsVerb::Create(a)) => teams_put(a, true, stdout),
        AdminNoun::Teams(TeamsVerb::Update(a)) => teams_put(a, false, stdout),
        AdminNoun::Projects(ProjectsVerb::List(a)) => projects_list(a, stdout),
        AdminNoun::Projects(ProjectsVerb::Create(a)) => projects_create(a, stdout),
        AdminNoun::Users(UsersVerb::List(a)) => users_list(a, stdout),
        AdminNoun::Users(UsersVerb::Create(a)) => users_create(a, stdout),
        AdminNoun::Users(UsersVerb::Update(a)) => users_update(a, stdout),
        AdminNoun::Tokens(TokensVerb::List(a)) => tokens_list(a, stdout),
        AdminNoun::Tokens(TokensVerb::Create(a)) => tokens_create(a, stdout, stderr),
        AdminNoun::Tokens(TokensVerb::Revoke(a)) => tokens_revoke(a, stdout),
        AdminNoun::Audit(a) => audit(a, stdout),
    }
}

fn teams_list(args: &ListArgs, stdout: &mut dyn Write) -> anyhow::Result<()> {
    let client = connect(&args.client)?;
    if args.client.json {
        let answer: Value = client.teams()?;
        return write_json(stdout, &answer);
    }
    let teams: Vec<api::Team> = client.teams()?;
    let mut tw = table(stdout);
    writeln!(
        tw,
        "TEAM\tGUARANTEE\tBURST\tWEIGHT\tCLASSES\tBUSINESS UNIT\tPROJECTS"
    )?;
    for t in &teams {
        writeln!(
            tw,
            "{}\t{}\t{}\t{}\t{}\t{}\t{}",
            t.name,
            format_g(t.guaranteed_gpus, None),
            format_g(t.burst_gpus, None),
            format_g(t.weight, None),
            t.classes.join(","),
            or_dash(&t.business_unit),
            t.projects.join(",")
        )?;
    }
    tw.flush()?;
    Ok(())
}

/// `teams create` and `teams update`: the team as JSON, as Go prints it.
fn teams_put(args: &TeamArgs, create: bool, stdout: &mut dyn Write) -> anyhow::Result<()> {
    let client = connect(&args.client)?;
    let mut req = args.request();
    let team: Value = if create {
        req.name = args.name.clone();
        client.create_team(&req)?
    } else {
        client.update_team(&args.name, &req)?
    };
    write_json(stdout, &team)
}

fn projects_list(args: &ProjectsListArgs, stdout: &mut dyn Write) -> anyhow::Result<()> {
    let client = connect(&args.client)?;
    if args.client.json {
        let answer: Value = client.projects(&args.team)?;
        return write_json(stdout, &answer);
    }
    let projects: Vec<api::Project> = client.projects(&args.team)?;
    for p in &projects {
        writeln!(stdout, "{}/{}", p.team, p.name)?;
    }
    Ok(())
}

fn projects_create(args: &ProjectCreateArgs, stdout: &mut dyn Write) -> anyhow::Result<()> {
    let client = connect(&args.client)?;
    let p: api::Project = client.create_project(&args.team, &args.name)?;
    writeln!(stdout, "created project {}/{}", p.team, p.name)?;
    Ok(())
}

fn users_list(args: &ListArgs, stdout: &mut dyn Write) -> anyhow::Result<()> {
    let client = connect(&args.client)?;
    if args.client.json {
        let answer: Value = client.users()?;
        return write_json(stdout, &answer);
    }
    let users: Vec<api::User> = client.users()?;
    let mut tw = table(stdout);
    writeln!(tw, "USER\tROLE\tTEAM\tSTATUS")?;
    for u in &users {
        let status = if u.disabled { "disabled" } else { "active" };
        writeln!(tw, "{}\t{}\t{}\t{status}", u.name, u.role, or_dash(&u.team))?;
    }
    tw.flush()?;
    Ok(())
}

/// "admin", "member, team search", "viewer, team ads, disabled".
fn user_words(u: &api::User) -> String {
    let mut words = u.role.clone();
    if !u.team.is_empty() {
        words.push_str(&format!(", team {}", u.team));
    }
    if u.disabled {
        words.push_str(", disabled");
    }
    words
}

fn users_create(args: &UserCreateArgs, stdout: &mut dyn Write) -> anyhow::Result<()> {
    let client = connect(&args.client)?;
    let req = api::UserRequest {
        name: args.name.clone(),
        role: args.role.clone(),
        team: args.team.clone(),
    };
    let u: api::User = client.create_user(&req)?;
    writeln!(
        stdout,
        "created user {} ({}); give them a token with: partita admin tokens create {}",
        u.name,
        user_words(&u),
        u.name
    )?;
    Ok(())
}

fn users_update(args: &UserUpdateArgs, stdout: &mut dyn Write) -> anyhow::Result<()> {
    let disabled = match (args.disable, args.enable) {
        (true, _) => Some(true),
        (_, true) => Some(false),
        _ => None,
    };
    if args.role.is_none() && args.team.is_none() && disabled.is_none() {
        return Err(usage_error(
            "nothing to change: give --role, --team, --disable or --enable",
        ));
    }
    let client = connect(&args.client)?;
    let req = api::UserPatch {
        role: args.role.clone(),
        team: args.team.clone(),
        disabled,
    };
    let u: api::User = client.update_user(&args.name, &req)?;
    writeln!(stdout, "updated user {} ({})", u.name, user_words(&u))?;
    Ok(())
}

fn tokens_list(args: &ListArgs, stdout: &mut dyn Write) -> anyhow::Result<()> {
    let client = connect(&args.client)?;
    if args.client.json {
        let answer: Value = client.tokens()?;
        return write_json(stdout, &answer);
    }
    let tokens: Vec<api::Token> = client.tokens()?;
    let mut tw = table(stdout);
    writeln!(tw, "ID\tUSER\tCREATED\tEXPIRES\tREVOKED\tDESCRIPTION")?;
    let time = |t: Option<DateTime<Utc>>| t.map(rfc3339).unwrap_or_else(|| "-".into());
    for t in &tokens {
        writeln!(
            tw,
            "{}\t{}\t{}\t{}\t{}\t{}",
            t.id,
            t.user,
            rfc3339(t.created_at),
            time(t.expires_at),
            time(t.revoked_at),
            t.description
        )?;
    }
    tw.flush()?;
    Ok(())
}

/// The secret alone on stdout (so that `$(partita admin tokens create u)`
/// is the token), what it is on stderr.
fn tokens_create(
    args: &TokenCreateArgs,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> anyhow::Result<()> {
    let client = connect(&args.client)?;
    let req = api::TokenRequest {
        description: args.description.clone(),
        expires_at: args.expires_at,
    };
    if args.client.json {
        let answer: Value = client.create_token(&args.user, &req)?;
        return write_json(stdout, &answer);
    }
    let t: api::NewToken = client.create_token(&args.user, &req)?;
    let expires = t
        .token
        .expires_at
        .map(|e| format!(", expires {}", rfc3339(e)))
        .unwrap_or_default();
    writeln!(
        stderr,
        "token {} for {}{expires}; the secret is shown only now:",
        t.token.id, t.token.user
    )?;
    writeln!(stdout, "{}", t.secret)?;
    Ok(())
}

fn tokens_revoke(args: &TokenRevokeArgs, stdout: &mut dyn Write) -> anyhow::Result<()> {
    let client = connect(&args.client)?;
    let t: api::Token = client.revoke_token(&args.id)?;
    writeln!(stdout, "revoked {} ({})", t.id, t.user)?;
    Ok(())
}

fn audit(args: &AuditArgs, stdout: &mut dyn Write) -> anyhow::Result<()> {
    let client = connect(&args.client)?;
    let limit = args.limit.to_string();
    let q = query(&[("limit", &limit)]);
    if args.client.json {
        let answer: Value = client.audit(&q)?;
        return write_json(stdout, &answer);
    }
    let list: api::AuditList = client.audit(&q)?;
    let mut tw = table(stdout);
    writeln!(tw, "SEQ\tAT\tACTOR\tACTION\tTARGET")?;
    for e in &list.entries {
        writeln!(
            tw,
            "{}\t{}\t{}\t{}\t{} {}",
            e.seq,
            rfc3339(e.at),
            e.actor,
            e.action,
            e.target_kind,
            e.target
        )?;
    }
    tw.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_prints_as_gos_table() {
        let r: report::Report = serde_json::from_str(
            r#"{"from":"2026-03-01T00:00:00Z","to":"2026-04-01T00:00:00Z",
                "group_by":["business_unit","team"],"currency":"USD","prices":"built-in",
                "rows":[{"business_unit":"","team":"ads","gpu_hours":"1.5","cost":"3.000000","micro_gpu_hours":1500000,"cost_micros":3000000,"holds":2},
                        {"business_unit":"web","team":"search","gpu_hours":"10","cost":"20","micro_gpu_hours":1,"cost_micros":1,"holds":7}],
                "total":{"gpu_hours":"11.5","cost":"23","micro_gpu_hours":1,"cost_micros":1,"holds":9}}"#,
        )
        .unwrap();
        let mut out = Vec::new();
        write_report(&r, &mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "2026-03-01T00:00:00Z to 2026-04-01T00:00:00Z, USD (prices: built-in)\n\
             \n\
             BUSINESS_UNIT  TEAM    GPU-HOURS  COST      HOLDS\n\
             -              ads     1.5        3.000000  2\n\
             web            search  10         20        7\n\
             TOTAL                  11.5       23        9\n"
        );
    }

    #[test]
    fn team_flags_left_out_are_absent_from_the_request() {
        let a = TeamArgs {
            client: ClientArgs {
                server: None,
                token: None,
                data_dir: None,
                json: false,
            },
            name: "t".into(),
            guarantee: Some(2.0),
            burst: None,
            weight: None,
            classes: "batch, best-effort".into(),
            business_unit: Some(String::new()),
        };
        assert_eq!(
            serde_json::to_value(a.request()).unwrap(),
            serde_json::json!({"guaranteed_gpus": 2.0, "classes": ["batch", "best-effort"], "business_unit": ""})
        );
    }
}
