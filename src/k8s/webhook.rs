//! The mutating admission webhook's logic (port of
//! go/internal/kube/webhook.go), as pure functions: the HTTP/TLS server
//! around `review` is the scheduler's.
//!
//! The webhook turns a memory need into a device request. A pod's
//! resources cannot change after it is created, and under the GPU
//! Operator's mixed strategy the device plugin hands a MIG instance only to
//! a pod whose spec requests nvidia.com/mig-<profile>; so the profile must
//! be chosen when the pod is created. The webhook does that for pods of
//! Partita's scheduler that carry partita.dev/gpu-memory and request no
//! NVIDIA resource: it adds nvidia.com/mig-<profile>: 1 (or, where no MIG
//! GPU holds the need, nvidia.com/gpu: 1) to the first container and
//! records the choice in partita.dev/mig-profile.
//!
//! It never refuses a pod: a pod it cannot size goes through unchanged,
//! with a warning, and the scheduler says why it waits.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod};
use partita_engine::gpu::{Profile, lookup};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::names::{
    ANNOTATION_GPU_MEMORY, ANNOTATION_MIG_PROFILE, LABEL_GPU_PRODUCT, RESOURCE_GPU,
    RESOURCE_MIG_PREFIX,
};
use super::node::{NodeOptions, view_node};
use super::pod::{annotations_of, gpu_resources, memory_need};

/// Where the webhook is served.
pub const WEBHOOK_PATH: &str = "/mutate-pods";

/// The largest AdmissionReview read (Go's 4 MiB `io.LimitReader`); the
/// API server's own limit on a pod is smaller.
pub const MAX_REVIEW_BYTES: usize = 4 << 20;

/// The device request chosen for a memory need: a MIG instance
/// (`profile` set, `resource` nvidia.com/mig-<profile>) or one whole GPU
/// (`resource` nvidia.com/gpu).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Device {
    pub resource: String,
    pub profile: Option<String>,
}

/// No GPU model of the cluster holds the need.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("no GPU model in the cluster ({models}) holds {peak_mib} MiB")]
pub struct NoDevice {
    /// The models looked at, joined with ", ".
    pub models: String,
    pub peak_mib: i64,
}

/// Picks the device request for a memory need on the cluster's GPU models
/// (`models`: the nodes' models, with how many GPUs each has): among
/// MIG-capable models the pod may use (`allowed`; empty allows all), the
/// smallest profile that holds peak memory (plus headroom) and the compute
/// share (fewest memory slices, then fewest compute slices; ties to the
/// model with more GPUs, then by name); else one whole GPU of a model big
/// enough. The engine then places the pod like any pod asking for that
/// resource, on any model that offers the profile.
pub fn choose_device(
    peak_mib: i64,
    compute: f64,
    headroom: f64,
    allowed: &[String],
    models: &BTreeMap<String, i64>,
) -> Result<Device, NoDevice> {
    let mut names: Vec<&String> = models
        .keys()
        .filter(|n| allowed.is_empty() || allowed.contains(n))
        .collect();
    // Most GPUs first; the map gave them in name order, and the sort is
    // stable.
    names.sort_by(|a, b| models[*b].cmp(&models[*a]));
    let mut best: Option<Profile> = None;
    for n in &names {
        let m = lookup(n);
        if !m.mig {
            continue;
        }
        let Ok(p) = m.profile_for(peak_mib, compute, headroom) else {
            continue;
        };
        let smaller = best
            .as_ref()
            .is_none_or(|b| p.memory < b.memory || (p.memory == b.memory && p.compute < b.compute));
        if smaller {
            best = Some(p.clone());
        }
    }
    if let Some(p) = best {
        return Ok(Device {
            resource: format!("{RESOURCE_MIG_PREFIX}{}", p.name),
            profile: Some(p.name.to_string()),
        });
    }
    let need = peak_mib as f64 * (1.0 + headroom);
    for n in &names {
        let m = lookup(n);
        if m.memory_mib > 0 && m.memory_mib as f64 >= need {
            return Ok(Device {
                resource: RESOURCE_GPU.to_string(),
                profile: None,
            });
        }
    }
    let names: Vec<&str> = names.iter().map(|n| n.as_str()).collect();
    Err(NoDevice {
        models: names.join(", "),
        peak_mib,
    })
}

/// One RFC 6902 operation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PatchOp {
    pub op: String,
    pub path: String,
    pub value: Value,
}

impl PatchOp {
    fn add(path: String, value: Value) -> PatchOp {
        PatchOp {
            op: "add".to_string(),
            path,
            value,
        }
    }
}

/// The JSON patch that adds the device request to a pod of
/// `scheduler_name`, or none, with a warning saying why not when the pod
/// asked for a memory profile. `nodes` are the cluster's nodes (the
/// scheduler's reflector).
pub fn mutate(
    p: &Pod,
    scheduler_name: &str,
    headroom: f64,
    nodes: &[Arc<Node>],
) -> (Vec<PatchOp>, Option<String>) {
    let Some(spec) = &p.spec else {
        return (Vec::new(), None);
    };
    if spec.scheduler_name.as_deref().unwrap_or("") != scheduler_name || spec.containers.is_empty()
    {
        return (Vec::new(), None);
    }
    let ann = annotations_of(p);
    if !ann.contains_key(ANNOTATION_GPU_MEMORY) {
        return (Vec::new(), None);
    }
    if gpu_resources(p).any() {
        return (Vec::new(), None); // asks for devices itself: honoured as is
    }
    let (peak, compute) = match memory_need(ann) {
        Ok(need) => need,
        Err(e) => return (Vec::new(), Some(format!("partita: {e}"))),
    };
    let mut models: BTreeMap<String, i64> = BTreeMap::new();
    for n in nodes {
        let v = view_node(n, &NodeOptions::default());
        if v.spec.gpus > 0 {
            *models.entry(v.spec.gpu_model).or_insert(0) += i64::from(v.spec.gpus);
        }
    }
    let allowed: Vec<String> = spec
        .node_selector
        .as_ref()
        .and_then(|s| s.get(LABEL_GPU_PRODUCT))
        .map(|prod| vec![lookup(prod).name.clone()])
        .unwrap_or_default();
    match choose_device(peak, compute, headroom, &allowed, &models) {
        Ok(d) => (device_patch(p, &d), None),
        Err(e) => (Vec::new(), Some(format!("partita: {e}"))),
    }
}

/// Adds `device.resource: 1` to the first container's limits and requests
/// and the chosen profile to the annotations.
fn device_patch(p: &Pod, device: &Device) -> Vec<PatchOp> {
    let name = &device.resource;
    let mut ops = Vec::new();
    let resources = p
        .spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .and_then(|c| c.resources.as_ref());
    match resources {
        // The API server always writes the field; a pod from elsewhere
        // may lack it, and a patch into a missing object fails.
        None => ops.push(PatchOp::add(
            "/spec/containers/0/resources".to_string(),
            json!({"limits": {name: "1"}, "requests": {name: "1"}}),
        )),
        Some(r) => {
            for (field, list) in [("limits", &r.limits), ("requests", &r.requests)] {
                let base = format!("/spec/containers/0/resources/{field}");
                if list.is_none() {
                    ops.push(PatchOp::add(base, json!({name: "1"})));
                } else {
                    ops.push(PatchOp::add(
                        format!("{base}/{}", escape_pointer(name)),
                        json!("1"),
                    ));
                }
            }
        }
    }
    if let Some(profile) = &device.profile {
        ops.push(PatchOp::add(
            format!(
                "/metadata/annotations/{}",
                escape_pointer(ANNOTATION_MIG_PROFILE)
            ),
            json!(profile),
        ));
    }
    ops
}

/// Escapes a JSON pointer segment (RFC 6901).
fn escape_pointer(s: &str) -> String {
    s.replace('~', "~0").replace('/', "~1")
}

/// Why a body is not an AdmissionReview to answer.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ReviewError {
    #[error("want an admission.k8s.io/v1 AdmissionReview: {0}")]
    NotAReview(String),
    #[error(
        "want an admission.k8s.io/v1 AdmissionReview: the body is {0} bytes, more than {MAX_REVIEW_BYTES}"
    )]
    TooLarge(usize),
}

/// The part of an AdmissionReview the webhook reads.
#[derive(Deserialize)]
struct ReviewIn {
    request: Option<RequestIn>,
}

#[derive(Deserialize)]
struct RequestIn {
    #[serde(default)]
    uid: String,
    #[serde(default)]
    object: Option<Value>,
}

/// The AdmissionReview answered (admission.k8s.io/v1).
#[derive(Serialize)]
struct ReviewOut {
    #[serde(rename = "apiVersion")]
    api_version: &'static str,
    kind: &'static str,
    response: ResponseOut,
}

#[derive(Serialize)]
struct ResponseOut {
    uid: String,
    allowed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<StatusOut>,
    /// The JSON patch, base64 (Go's []byte).
    #[serde(skip_serializing_if = "Option::is_none")]
    patch: Option<String>,
    #[serde(rename = "patchType", skip_serializing_if = "Option::is_none")]
    patch_type: Option<&'static str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    warnings: Vec<String>,
}

#[derive(Serialize)]
struct StatusOut {
    code: u16,
    message: String,
}

fn encode(out: &ReviewOut) -> Vec<u8> {
    // Plain structs of strings: serialising cannot fail; an empty body
    // would still be an answer the API server reports.
    let mut body = serde_json::to_vec(out).unwrap_or_default();
    body.push(b'\n');
    body
}

/// Answers an AdmissionReview: allowed, with the JSON patch of `mutate`
/// (or a warning). A body that is not an AdmissionReview is an error, for
/// the server to answer 400 with its text, as the Go build does.
pub fn try_review(
    request_body: &[u8],
    scheduler_name: &str,
    headroom: f64,
    nodes: &[Arc<Node>],
) -> Result<Vec<u8>, ReviewError> {
    if request_body.len() > MAX_REVIEW_BYTES {
        return Err(ReviewError::TooLarge(request_body.len()));
    }
    let review: ReviewIn =
        serde_json::from_slice(request_body).map_err(|e| ReviewError::NotAReview(e.to_string()))?;
    let Some(request) = review.request else {
        return Err(ReviewError::NotAReview("it has no request".to_string()));
    };
    let mut resp = ResponseOut {
        uid: request.uid,
        allowed: true,
        status: None,
        patch: None,
        patch_type: None,
        warnings: Vec::new(),
    };
    let pod = match request.object {
        Some(v) => serde_json::from_value::<Pod>(v).map_err(|e| e.to_string()),
        None => Err("the request has no object".to_string()),
    };
    match pod {
        Err(e) => resp.warnings = vec![format!("partita: pod not readable: {e}")],
        Ok(pod) => {
            let (patch, warning) = mutate(&pod, scheduler_name, headroom, nodes);
            if !patch.is_empty() {
                let data = serde_json::to_vec(&patch).unwrap_or_default();
                resp.patch = Some(base64(&data));
                resp.patch_type = Some("JSONPatch");
            } else if let Some(w) = warning {
                resp.warnings = vec![w];
            }
        }
    }
    Ok(encode(&ReviewOut {
        api_version: "admission.k8s.io/v1",
        kind: "AdmissionReview",
        response: resp,
    }))
}

/// `try_review`, with an error answered as an AdmissionReview that
/// refuses (code 400, the error's text): the caller was not the API
/// server, or it sent what no API server sends.
pub fn review(
    request_body: &[u8],
    scheduler_name: &str,
    headroom: f64,
    nodes: &[Arc<Node>],
) -> Vec<u8> {
    try_review(request_body, scheduler_name, headroom, nodes).unwrap_or_else(|e| {
        encode(&ReviewOut {
            api_version: "admission.k8s.io/v1",
            kind: "AdmissionReview",
            response: ResponseOut {
                uid: String::new(),
                allowed: false,
                status: Some(StatusOut {
                    code: 400,
                    message: e.to_string(),
                }),
                patch: None,
                patch_type: None,
                warnings: Vec::new(),
            },
        })
    })
}

/// Standard base64 with padding (RFC 4648), as Go's encoding/json writes
/// a []byte.
fn base64(data: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for (i, shift) in [18, 12, 6, 0].into_iter().enumerate() {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> shift & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::k8s::fixtures::{gpu_node, pod};
    use crate::k8s::names::{ANNOTATION_GPU_COMPUTE, DEFAULT_SCHEDULER_NAME};
    use crate::k8s::pod::demand_of;
    use proptest::prelude::*;

    /// Decodes what `base64` wrote.
    fn unbase64(s: &str) -> Vec<u8> {
        let value = |c: u8| match c {
            b'A'..=b'Z' => u32::from(c - b'A'),
            b'a'..=b'z' => u32::from(c - b'a') + 26,
            b'0'..=b'9' => u32::from(c - b'0') + 52,
            b'+' => 62,
            b'/' => 63,
            _ => panic!("not base64: {c}"),
        };
        let mut out = Vec::new();
        for chunk in s.as_bytes().chunks(4) {
            let pad = chunk.iter().filter(|&&c| c == b'=').count();
            let n = chunk
                .iter()
                .filter(|&&c| c != b'=')
                .fold(0, |n, &c| (n << 6) | value(c))
                << (6 * pad);
            out.extend(&[(n >> 16) as u8, (n >> 8) as u8, n as u8][..3 - pad]);
        }
        out
    }

    #[test]
    fn base64_is_rfc_4648() {
        for (data, want) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(data.as_bytes()), want);
            assert_eq!(unbase64(want), data.as_bytes());
        }
    }

    /// A case of `choose_device_cases`: its name, the peak MiB, the
    /// compute share, the allowed models, the cluster's models and the
    /// resource wanted ("" for none).
    type ChooseCase<'a> = (
        &'static str,
        i64,
        f64,
        Vec<String>,
        &'a BTreeMap<String, i64>,
        &'static str,
    );

    // TestChooseDevice: its eight cases.
    #[test]
    fn choose_device_cases() {
        let models = |pairs: &[(&str, i64)]| -> BTreeMap<String, i64> {
            pairs.iter().map(|(m, n)| (m.to_string(), *n)).collect()
        };
        let h100 = models(&[("H100-80GB", 16)]);
        let mixed = models(&[("H100-80GB", 8), ("H200-141GB", 8), ("L4", 4)]);
        let only = |m: &str| vec![m.to_string()];
        let cases: Vec<ChooseCase> = vec![
            (
                "a small model takes 1g.10gb",
                6 << 10,
                0.0,
                vec![],
                &h100,
                "nvidia.com/mig-1g.10gb",
            ),
            (
                "headroom pushes 10 GiB to 1g.20gb",
                10 << 10,
                0.0,
                vec![],
                &h100,
                "nvidia.com/mig-1g.20gb",
            ),
            (
                "compute pushes to 2g",
                6 << 10,
                0.25,
                vec![],
                &h100,
                "nvidia.com/mig-2g.20gb",
            ),
            (
                "70 GiB on H100 is 7g",
                70 << 10,
                0.0,
                vec![],
                &h100,
                "nvidia.com/mig-7g.80gb",
            ),
            (
                "the H200's 1g.18gb holds 14 GiB in one memory slice, the H100 needs two",
                14 << 10,
                0.0,
                vec![],
                &mixed,
                "nvidia.com/mig-1g.18gb",
            ),
            (
                "the product selector limits the models",
                14 << 10,
                0.0,
                only("H100-80GB"),
                &mixed,
                "nvidia.com/mig-1g.20gb",
            ),
            (
                "only a non-MIG model: a whole GPU",
                10 << 10,
                0.0,
                only("L4"),
                &mixed,
                "nvidia.com/gpu",
            ),
            ("nothing holds it", 200 << 10, 0.0, vec![], &mixed, ""),
        ];
        for (name, peak, compute, allowed, models, want) in cases {
            let got = choose_device(peak, compute, 0.1, &allowed, models);
            match got {
                Ok(d) => assert_eq!(d.resource, want, "{name}"),
                Err(e) => {
                    assert_eq!(want, "", "{name}: {e}");
                    assert_eq!(
                        e.to_string(),
                        "no GPU model in the cluster (H100-80GB, H200-141GB, L4) holds 204800 MiB"
                    );
                }
            }
        }
        let d = choose_device(6 << 10, 0.0, 0.1, &[], &h100).unwrap();
        assert_eq!(d.profile.as_deref(), Some("1g.10gb"));
        let d = choose_device(10 << 10, 0.0, 0.1, &only("L4"), &mixed).unwrap();
        assert_eq!(d.profile, None);
    }

    /// A body the API server would send for `p`.
    fn review_body(p: &Pod) -> Vec<u8> {
        serde_json::to_vec(&json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {"uid": "u1", "object": p},
        }))
        .unwrap()
    }

    /// The response of an answer, checked to allow and to name the UID.
    fn response_of(body: &[u8]) -> Value {
        let out: Value = serde_json::from_slice(body).unwrap();
        assert_eq!(out["apiVersion"], "admission.k8s.io/v1");
        assert_eq!(out["kind"], "AdmissionReview");
        let resp = out["response"].clone();
        assert_eq!(resp["allowed"], true, "{resp}");
        assert_eq!(resp["uid"], "u1", "{resp}");
        resp
    }

    // TestWebhookPatchesMemoryPods.
    #[test]
    fn webhook_patches_memory_pods() {
        let nodes = vec![gpu_node("a", 8).obj()];
        let answer = |p: &Pod| {
            let body = review(&review_body(p), DEFAULT_SCHEDULER_NAME, 0.1, &nodes);
            response_of(&body)
        };
        // 12 GiB plus 10 % headroom needs the 2 memory slices of a 1g.20gb.
        let resp = answer(&pod("p").ann(ANNOTATION_GPU_MEMORY, "12Gi").pod());
        assert_eq!(resp["patchType"], "JSONPatch");
        let patch = String::from_utf8(unbase64(resp["patch"].as_str().unwrap())).unwrap();
        for want in [
            // The pod has no limits at all: the map is added whole.
            r#"{"op":"add","path":"/spec/containers/0/resources/limits","value":{"nvidia.com/mig-1g.20gb":"1"}}"#,
            r#"{"op":"add","path":"/spec/containers/0/resources/requests/nvidia.com~1mig-1g.20gb","value":"1"}"#,
            r#""path":"/metadata/annotations/partita.dev~1mig-profile","value":"1g.20gb""#,
        ] {
            assert!(patch.contains(want), "patch {patch} lacks {want}");
        }
        let cases = [
            (
                "a pod that asks for a device",
                pod("p").gpus(1).ann(ANNOTATION_GPU_MEMORY, "18Gi").pod(),
                None,
            ),
            (
                "another scheduler's pod",
                pod("p")
                    .scheduler("default-scheduler")
                    .ann(ANNOTATION_GPU_MEMORY, "18Gi")
                    .pod(),
                None,
            ),
            ("a pod without the annotation", pod("p").pod(), None),
            (
                "a pod with a bad annotation",
                pod("p").ann(ANNOTATION_GPU_MEMORY, "x").pod(),
                Some("partita: annotation partita.dev/gpu-memory=\"x\": not a quantity"),
            ),
            (
                "a pod nothing in the cluster holds",
                pod("p").ann(ANNOTATION_GPU_MEMORY, "500Gi").pod(),
                Some("partita: no GPU model in the cluster (H100-80GB) holds 512000 MiB"),
            ),
        ];
        for (name, p, warning) in cases {
            let resp = answer(&p);
            assert!(resp.get("patch").is_none(), "{name}: patched {resp}");
            match warning {
                None => assert!(resp.get("warnings").is_none(), "{name}: {resp}"),
                Some(w) => {
                    let got = resp["warnings"][0].as_str().unwrap_or("");
                    assert!(got.starts_with(w), "{name}: warning {got:?}, want {w:?}");
                }
            }
        }
    }

    // The patch applied to the pod asks for what the webhook chose, and
    // the pod's demand is then that MIG instance.
    #[test]
    fn the_patch_makes_the_pod_ask_for_the_instance() {
        let nodes = vec![gpu_node("a", 8).obj()];
        let mut p = pod("p")
            .ann(ANNOTATION_GPU_MEMORY, "30Gi")
            .ann(ANNOTATION_GPU_COMPUTE, "0.3")
            .pod();
        let (patch, warning) = mutate(&p, DEFAULT_SCHEDULER_NAME, 0.1, &nodes);
        assert_eq!(warning, None);
        let paths: Vec<&str> = patch.iter().map(|op| op.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "/spec/containers/0/resources/limits",
                "/spec/containers/0/resources/requests/nvidia.com~1mig-3g.40gb",
                "/metadata/annotations/partita.dev~1mig-profile",
            ]
        );
        // Applied by hand.
        let r = p.spec.as_mut().unwrap().containers[0]
            .resources
            .as_mut()
            .unwrap();
        let one = crate::k8s::fixtures::q("1");
        r.limits = Some([("nvidia.com/mig-3g.40gb".to_string(), one.clone())].into());
        r.requests
            .as_mut()
            .unwrap()
            .insert("nvidia.com/mig-3g.40gb".to_string(), one);
        assert_eq!(demand_of(&p).unwrap().to_string(), "MIG 3g.40gb");
        // A pod already asking is left alone.
        assert_eq!(
            mutate(&p, DEFAULT_SCHEDULER_NAME, 0.1, &nodes),
            (vec![], None)
        );
    }

    // A first container without resources gets the whole object.
    #[test]
    fn a_container_without_resources_gets_them() {
        let mut p = pod("p").ann(ANNOTATION_GPU_MEMORY, "5Gi").pod();
        p.spec.as_mut().unwrap().containers[0].resources = None;
        let (patch, _) = mutate(&p, DEFAULT_SCHEDULER_NAME, 0.1, &[gpu_node("a", 1).obj()]);
        assert_eq!(patch[0].path, "/spec/containers/0/resources");
        assert_eq!(
            patch[0].value,
            json!({"limits": {"nvidia.com/mig-1g.10gb": "1"}, "requests": {"nvidia.com/mig-1g.10gb": "1"}})
        );
    }

    // A body that is not an AdmissionReview is answered with the reason,
    // never a panic; an unreadable pod is let through with a warning.
    #[test]
    fn malformed_reviews_are_answered_in_words() {
        let nodes = vec![gpu_node("a", 1).obj()];
        for (body, why) in [
            (&b""[..], "EOF while parsing"),
            (b"not json", "expected ident"),
            (b"{}", "it has no request"),
            (b"[1,2]", "invalid type"),
            (br#"{"request": 7}"#, "invalid type"),
        ] {
            let e = try_review(body, DEFAULT_SCHEDULER_NAME, 0.1, &nodes).unwrap_err();
            let text = e.to_string();
            assert!(
                text.starts_with("want an admission.k8s.io/v1 AdmissionReview: ")
                    && text.contains(why),
                "{:?}: {text}",
                String::from_utf8_lossy(body)
            );
            let out: Value =
                serde_json::from_slice(&review(body, DEFAULT_SCHEDULER_NAME, 0.1, &nodes)).unwrap();
            assert_eq!(out["response"]["allowed"], false);
            assert_eq!(out["response"]["status"]["code"], 400);
            assert_eq!(out["response"]["status"]["message"], text);
        }
        let big = vec![b' '; MAX_REVIEW_BYTES + 1];
        assert_eq!(
            try_review(&big, DEFAULT_SCHEDULER_NAME, 0.1, &nodes),
            Err(ReviewError::TooLarge(MAX_REVIEW_BYTES + 1))
        );
        for object in [
            json!(null),
            json!({"spec": 3}),
            json!({"apiVersion": "v2", "kind": "Pod"}),
        ] {
            let body =
                serde_json::to_vec(&json!({"request": {"uid": "u1", "object": object}})).unwrap();
            let resp = response_of(&review(&body, DEFAULT_SCHEDULER_NAME, 0.1, &nodes));
            let w = resp["warnings"][0].as_str().unwrap();
            assert!(w.starts_with("partita: pod not readable: "), "{w}");
        }
    }

    /// Annotation values: well-formed ones and anything.
    fn annotation_text() -> impl Strategy<Value = String> {
        prop_oneof![
            "[-+]?[0-9]{0,22}(\\.[0-9]{0,4})?(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|e[-+]?[0-9]{1,4})?",
            "[-+ ]?(0|1|0\\.[0-9]{1,3}|NaN|inf|-inf|1e-3|[0-9]{1,30})[ ]?",
            "[0-9]{1,3}(h|m|s|ms)([0-9]{1,2}m)?|-1h|20[0-9]{2}-0[1-9]-1[0-9]T0[0-9]:00:00Z",
            "\\PC{0,12}",
        ]
    }

    /// Resource lists: device resources and CPU/memory, any quantity.
    fn resources() -> impl Strategy<Value = BTreeMap<String, String>> {
        proptest::collection::btree_map(
            prop_oneof![
                Just("cpu".to_string()),
                Just("memory".to_string()),
                Just(RESOURCE_GPU.to_string()),
                Just(format!("{RESOURCE_MIG_PREFIX}1g.10gb")),
                Just(format!("{RESOURCE_MIG_PREFIX}3g.40gb")),
                "nvidia.com/mig-\\PC{0,6}",
            ],
            annotation_text(),
            0..4,
        )
    }

    prop_compose! {
        fn any_pod()(
            memory in proptest::option::of(annotation_text()),
            compute in proptest::option::of(annotation_text()),
            min_member in proptest::option::of(annotation_text()),
            runtime in proptest::option::of(annotation_text()),
            checkpoint in proptest::option::of(annotation_text()),
            gpus in proptest::option::of(annotation_text()),
            limits in resources(),
            requests in resources(),
            init in resources(),
            group in proptest::bool::ANY,
            bound in proptest::bool::ANY,
            name in "[a-z]{1,3}",
        ) -> Pod {
            let mut b = pod(&name);
            for (k, v) in [
                (ANNOTATION_GPU_MEMORY, memory),
                (ANNOTATION_GPU_COMPUTE, compute),
                (crate::k8s::names::ANNOTATION_MIN_MEMBER, min_member),
                (crate::k8s::names::ANNOTATION_ESTIMATED_RUNTIME, runtime),
                (crate::k8s::names::ANNOTATION_LAST_CHECKPOINT, checkpoint),
                (crate::k8s::names::ANNOTATION_GPUS, gpus),
            ] {
                if let Some(v) = v {
                    b = b.ann(k, &v);
                }
            }
            if group {
                b = b.group("g");
            }
            if bound {
                b = b.on("a", &[]);
            }
            let mut p = b.pod();
            let spec = p.spec.as_mut().unwrap();
            let quantities = |m: BTreeMap<String, String>| {
                m.into_iter().map(|(k, v)| (k, crate::k8s::fixtures::q(v))).collect()
            };
            let r = spec.containers[0].resources.get_or_insert_default();
            r.limits = Some(quantities(limits));
            r.requests = Some(quantities(requests));
            let mut c = spec.containers[0].clone();
            c.name = "init".to_string();
            c.resources.get_or_insert_default().limits = Some(quantities(init));
            spec.init_containers = Some(vec![c]);
            p
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

        // Whatever a user writes in annotations and resources, reading a
        // pod, building a snapshot of it and reviewing it never panic; a
        // memory need read is positive, a compute share within 0 and 1;
        // the review allows the pod and names its UID.
        #[test]
        fn any_pod_is_read_or_refused_in_words(pods in proptest::collection::vec(any_pod(), 1..4)) {
            let nodes = vec![gpu_node("a", 4).obj(), gpu_node("m", 2).mig(1, &[("1g.10gb", 7)]).obj()];
            for p in &pods {
                let _ = crate::k8s::pod::task_of(p);
                let _ = crate::k8s::pod::pod_requests(p);
                if let Ok((peak, compute)) = memory_need(annotations_of(p)) {
                    prop_assert!(peak > 0);
                    prop_assert!((0.0..=1.0).contains(&compute));
                }
                if let Err(e) = demand_of(p) {
                    prop_assert!(!e.to_string().is_empty());
                }
                let body = review(&review_body(p), DEFAULT_SCHEDULER_NAME, 0.1, &nodes);
                let out: Value = serde_json::from_slice(&body).unwrap();
                prop_assert_eq!(&out["response"]["allowed"], &json!(true));
                prop_assert_eq!(&out["response"]["uid"], &json!("u1"));
            }
            let obj = crate::k8s::snapshot::Objects {
                nodes,
                pods: pods.into_iter().map(Arc::new).collect(),
                ..Default::default()
            };
            for freeze_busy in [false, true] {
                let opt = crate::k8s::snapshot::SnapshotOptions {
                    scheduler_name: DEFAULT_SCHEDULER_NAME.to_string(),
                    headroom: 0.1,
                    freeze_busy,
                    ..Default::default()
                };
                let s = crate::k8s::snapshot::build_snapshot(&obj, &opt).unwrap();
                prop_assert!(s.state.check().is_ok());
                for j in &s.jobs {
                    prop_assert_eq!(j.placed.len(), j.spec.tasks.len());
                }
            }
        }

        // Bodies that are not AdmissionReviews are answered, never a
        // panic: as JSON a server can send back.
        #[test]
        fn any_body_is_answered(body in prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..64),
            "\\{\"request\": ?(null|\\{\"uid\": ?\"[a-z]{0,3}\"(, ?\"object\": ?(null|\\{\\}|\\[\\]|\"x\"|\\{\"spec\": ?\\{\\}\\}))?\\})\\}"
                .prop_map(String::into_bytes),
        ]) {
            let nodes = vec![gpu_node("a", 1).obj()];
            let out: Value = serde_json::from_slice(&review(&body, DEFAULT_SCHEDULER_NAME, 0.1, &nodes)).unwrap();
            prop_assert!(out["response"]["allowed"].is_boolean());
        }
    }
}
