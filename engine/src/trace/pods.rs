//! The pod lists: openb_pod_list_*.csv.

use std::collections::BTreeSet;
use std::io::Read;

use super::nodes::{is_nan, name};
use super::table::{Column, Table, check_text, parse_rows, read_all};
use super::{Cause, ParseError, Pod};

// Column ids: indexes into POD_COLUMNS.
const NAME: usize = 0;
const CPU: usize = 1;
const MEMORY: usize = 2;
const NUM_GPU: usize = 3;
const GPU_MILLI: usize = 4;
const GPU_SPEC: usize = 5;
const QOS: usize = 6;
const PHASE: usize = 7;
const CREATION: usize = 8;
const DELETION: usize = 9;
const SCHEDULED: usize = 10;

const fn required(name: &'static str) -> Column {
    Column {
        name,
        required: true,
    }
}

const fn optional(name: &'static str) -> Column {
    Column {
        name,
        required: false,
    }
}

/// The first five columns are all the multigpu* lists have.
static POD_COLUMNS: [Column; 11] = [
    required("name"),
    required("cpu_milli"),
    required("memory_mib"),
    required("num_gpu"),
    required("gpu_milli"),
    optional("gpu_spec"),
    optional("qos"),
    optional("pod_phase"),
    optional("creation_time"),
    optional("deletion_time"),
    optional("scheduled_time"),
];

/// A whole GPU in the trace's milli units.
const FULL_GPU: i64 = 1000;

/// Reads a pod list from `r`, in file order; `file` names the input in
/// errors. See [`parse_pods`].
pub fn read_pods(r: impl Read, file: &str) -> Result<Vec<Pod>, ParseError> {
    parse_pods(read_all(r, file)?, file)
}

/// Parses a pod list (the file's bytes, or its text), in file order;
/// `file` names the input in errors. Besides well-formed non-negative
/// numbers and unique non-empty names, every row must ask for GPUs in one
/// of the trace's three shapes: no GPU (0, 0), a share of one GPU
/// (1, 1..=1000), or several whole GPUs (n, 1000).
pub fn parse_pods(data: impl AsRef<[u8]>, file: &str) -> Result<Vec<Pod>, ParseError> {
    parse_rows(data.as_ref(), file, &POD_COLUMNS, NAME, parse_pod, |p| {
        (&p.name, p.line)
    })
}

fn parse_pod(t: &Table) -> Result<Pod, ParseError> {
    let line = t.line();
    let name = name(t, NAME)?.to_string();
    let cpu_milli = t.count(CPU)?;
    let memory_mib = t.count(MEMORY)?;
    let (num_gpu, gpu_milli) = gpu_request(t)?;
    let gpu_spec_raw = t.text(GPU_SPEC)?;
    let gpu_spec = parse_spec(gpu_spec_raw).map_err(|cause| t.cell_error(GPU_SPEC, cause))?;
    let gpu_spec_raw = gpu_spec_raw.to_string();
    let qos = t.text(QOS)?.to_string();
    let phase = t.text(PHASE)?.to_string();
    let creation_time = t.opt_count(CREATION)?;
    let deletion_time = t.opt_count(DELETION)?;
    let scheduled_time = t.opt_count(SCHEDULED)?;
    Ok(Pod {
        name,
        cpu_milli,
        memory_mib,
        num_gpu,
        gpu_milli,
        gpu_spec,
        gpu_spec_raw,
        qos,
        phase,
        creation_time,
        deletion_time,
        scheduled_time,
        line,
    })
}

/// Reads num_gpu and gpu_milli and checks that together they describe one
/// of the trace's three request shapes. Errors about the pair name
/// gpu_milli, the cell that contradicts num_gpu.
fn gpu_request(t: &Table) -> Result<(usize, i64), ParseError> {
    let num = t.small_count(NUM_GPU)?;
    let milli = t.count(GPU_MILLI)?;
    let fault = if milli > FULL_GPU {
        Some(Cause::MilliRange)
    } else if num == 0 && milli != 0 {
        Some(Cause::MilliNoGpu)
    } else if num >= 1 && milli == 0 {
        Some(Cause::MilliZero)
    } else if num > 1 && milli != FULL_GPU {
        Some(Cause::MultiShare)
    } else {
        None
    };
    match fault {
        Some(cause) => Err(t.cell_error(GPU_MILLI, cause)),
        None => Ok((num, milli)),
    }
}

/// The list length above which `parse_spec` de-duplicates with a set: real
/// lists have at most seven entries, where a scan is cheaper, but a hostile
/// file must not make the reader quadratic.
const DEDUPE_BY_SET: usize = 16;

/// Splits a gpu_spec cell into its models. "" and "nan" mean no constraint
/// (an empty list). Repeated models are dropped, keeping first-seen order,
/// since the trace has lists such as "V100M16|V100M32|V100M32".
fn parse_spec(raw: &str) -> Result<Vec<String>, Cause> {
    if raw.is_empty() || is_nan(raw) {
        return Ok(Vec::new());
    }
    let parts = raw.split('|');
    let big = raw.split('|').count() > DEDUPE_BY_SET;
    let mut seen = BTreeSet::new();
    let mut models: Vec<String> = Vec::new();
    for m in parts {
        if m.is_empty() {
            return Err(Cause::EmptySpec);
        }
        if is_nan(m) {
            return Err(Cause::NanInSpec);
        }
        check_text(m.as_bytes())?;
        let repeated = if big {
            !seen.insert(m)
        } else {
            models.iter().any(|x| x == m)
        };
        if !repeated {
            models.push(m.to_string());
        }
    }
    Ok(models)
}
