//! yaml.v3's decoder, for the few Go types a scenario file decodes into:
//! text, booleans, numbers, lists, a map of numbers, structs, and the leaf
//! types that parse themselves (`raw.rs`). It keeps yaml.v3's behaviour
//! where an error text or a decoded value depends on it:
//!
//! - problems of type (an unknown field, a key given twice, a value of the
//!   wrong kind) are noted and decoding goes on; the first noted is the
//!   one reported;
//! - a leaf that does not parse (a bad duration) stops decoding at once,
//!   as do broken merges and aliases;
//! - null leaves a field as it was; a list drops the items it could not
//!   decode;
//! - merge keys (`<<`) bring in the fields a mapping does not give itself;
//! - aliases are followed, and a document whose decoding is mostly alias
//!   expansion is refused ("excessive aliasing"), as yaml.v3 refuses it.

use std::collections::BTreeSet;

use super::yaml::{
    self, BINARY, Kind, MAP, MERGE, NULL, NodeId, Resolved, SEQ, STR, Tree, resolve,
};
use crate::quote::quote;

/// Something that stops decoding.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Fatal {
    /// A leaf value that does not parse, at its node.
    Leaf {
        line: usize,
        column: usize,
        message: String,
    },
    /// yaml.v3's `failf`: a message without a line.
    Fail(String),
}

/// A problem of type, noted while decoding goes on. `message` words it as
/// yaml.v3 does; the error rewriting (`index.rs`) reads the parts.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum TypeError {
    UnknownField {
        line: usize,
        name: String,
        go_type: String,
    },
    Duplicate {
        line: usize,
        key: String,
        first_line: usize,
    },
    AlreadySet {
        line: usize,
        name: String,
        go_type: String,
    },
    CannotUnmarshal {
        line: usize,
        tag: String,
        /// The value as yaml.v3 shortens it (`value[:7] + "..."` past 10
        /// bytes); None for lists and mappings.
        value: Option<Vec<u8>>,
        go_type: String,
    },
}

impl TypeError {
    /// yaml.v3's text.
    pub fn message(&self) -> String {
        match self {
            TypeError::UnknownField {
                line,
                name,
                go_type,
            } => format!("line {line}: field {name} not found in type {go_type}"),
            TypeError::Duplicate {
                line,
                key,
                first_line,
            } => format!(
                "line {line}: mapping key {} already defined at line {first_line}",
                quote(key)
            ),
            TypeError::AlreadySet {
                line,
                name,
                go_type,
            } => format!("line {line}: field {name} already set in type {go_type}"),
            TypeError::CannotUnmarshal {
                line,
                tag,
                value,
                go_type,
            } => {
                let value = match value {
                    Some(v) => format!(" `{}`", String::from_utf8_lossy(v)),
                    None => String::new(),
                };
                format!("line {line}: cannot unmarshal {tag}{value} into {go_type}")
            }
        }
    }
}

/// What a Go value decodes from YAML. A type says which node kinds it
/// takes; the decoder reports the others as yaml.v3 does ("cannot
/// unmarshal !!seq into string").
pub(crate) trait Target {
    /// The Go type's name as yaml.v3 prints it: "string",
    /// "[]scenario.whole", "scenario.rawTeam".
    fn go_type(&self) -> String;

    /// For the leaf types with their own syntax (Go's `UnmarshalYAML`):
    /// decode the node, which is not null.
    fn unmarshal_yaml(&mut self, _tree: &Tree, _n: NodeId) -> Option<Result<(), Fatal>> {
        None
    }

    /// A resolved scalar; false if this type cannot hold it.
    fn scalar(&mut self, _r: &Resolved, _text: &str) -> bool {
        false
    }

    /// A null: lists and maps become empty (true), the rest stay as they
    /// were (false).
    fn null(&mut self) -> bool {
        false
    }

    /// A list: None if this type is not one.
    fn sequence(&mut self, _d: &mut Decoder, _n: NodeId) -> Result<Option<bool>, Fatal> {
        Ok(None)
    }

    /// A mapping (its keys already checked for duplicates): None if this
    /// type is not one.
    fn mapping(&mut self, _d: &mut Decoder, _n: NodeId) -> Result<Option<bool>, Fatal> {
        Ok(None)
    }
}

/// A Go struct: its YAML field names in order, and each field's target.
pub(crate) trait Struct: Target {
    fn field_names(&self) -> &'static [&'static str];
    fn field(&mut self, i: usize) -> &mut dyn Target;
}

/// yaml.v3's bounds on alias expansion: up to 400,000 decodes 99% of them
/// may come from aliases, falling to 10% at 4,000,000.
fn allowed_alias_ratio(decodes: usize) -> f64 {
    const LOW: usize = 400_000;
    const HIGH: usize = 4_000_000;
    if decodes <= LOW {
        0.99
    } else if decodes >= HIGH {
        0.10
    } else {
        0.99 - 0.89 * ((decodes - LOW) as f64 / (HIGH - LOW) as f64)
    }
}

/// A decoded value of Go's `interface{}`: what the merge of a mapping
/// needs to know of the mapping's own keys.
#[derive(Debug, Clone, PartialEq)]
enum Any {
    Null,
    Str(String),
    /// Any other scalar (a number, a boolean, a timestamp).
    Scalar(Resolved),
    Seq(Vec<Any>),
    /// A mapping; `strings` when every key is tagged !!str (Go makes a
    /// map[string]interface{} of it).
    Map {
        strings: bool,
    },
}

/// The decoder of one document.
pub(crate) struct Decoder<'t> {
    pub tree: &'t Tree,
    /// Refuse fields the target does not have.
    known_fields: bool,
    /// Problems of type noted so far, in document order.
    pub terrors: Vec<TypeError>,
    decode_count: usize,
    alias_count: usize,
    alias_depth: usize,
    /// Aliases being followed (to refuse one that contains itself).
    active_aliases: BTreeSet<NodeId>,
    /// While a merge is decoded: the keys already given (the mapping's
    /// own, then earlier merges'), which the merge does not override.
    /// Only keys that decode to Go strings can match a field or map key.
    merged_fields: Option<BTreeSet<String>>,
    /// How deep `decode_any` is: the one decode that follows a document to
    /// any depth (the schema's targets stop at five levels), bounded so
    /// that a pathological key cannot exhaust the stack. Go has no such
    /// bound; no file a person writes comes near it.
    any_depth: usize,
}

/// The bound on `Decoder::any_depth`.
const MAX_ANY_DEPTH: usize = 500;

impl<'t> Decoder<'t> {
    pub fn new(tree: &'t Tree, known_fields: bool) -> Decoder<'t> {
        Decoder {
            tree,
            known_fields,
            terrors: Vec::new(),
            decode_count: 0,
            alias_count: 0,
            alias_depth: 0,
            active_aliases: BTreeSet::new(),
            merged_fields: None,
            any_depth: 0,
        }
    }

    /// yaml.v3's `unmarshal`: decodes node `n` into `out`; false when it
    /// did not (a null, or a problem noted in `terrors`).
    pub fn unmarshal(&mut self, n: NodeId, out: &mut dyn Target) -> Result<bool, Fatal> {
        self.decode_count += 1;
        if self.alias_depth > 0 {
            self.alias_count += 1;
        }
        if self.alias_count > 100
            && self.decode_count > 1000
            && self.alias_count as f64 / self.decode_count as f64
                > allowed_alias_ratio(self.decode_count)
        {
            return Err(Fatal::Fail("document contains excessive aliasing".into()));
        }
        let node = self.tree.node(n);
        match node.kind {
            Kind::Document => {
                if node.content.len() == 1 {
                    self.unmarshal(node.content[0], out)?;
                    return Ok(true);
                }
                return Ok(false);
            }
            Kind::Alias => return self.alias(n, |d, target| d.unmarshal(target, out)),
            _ => {}
        }
        if self.tree.short_tag(n) != NULL
            && let Some(result) = out.unmarshal_yaml(self.tree, n)
        {
            result?;
            return Ok(true);
        }
        match node.kind {
            Kind::Scalar => self.scalar(n, out),
            Kind::Mapping => self.mapping(n, out),
            _ => self.sequence(n, out),
        }
    }

    /// Follows an alias, refusing one inside its own anchor.
    fn alias<R>(
        &mut self,
        n: NodeId,
        f: impl FnOnce(&mut Self, NodeId) -> Result<R, Fatal>,
    ) -> Result<R, Fatal> {
        let node = self.tree.node(n);
        if self.active_aliases.contains(&n) {
            return Err(Fatal::Fail(format!(
                "anchor '{}' value contains itself",
                node.value
            )));
        }
        let Some(target) = node.alias else {
            return Err(Fatal::Fail(format!(
                "unknown anchor '{}' referenced",
                node.value
            )));
        };
        self.active_aliases.insert(n);
        self.alias_depth += 1;
        let result = f(self, target);
        self.alias_depth -= 1;
        self.active_aliases.remove(&n);
        result
    }

    /// Notes that `n` cannot go into `out`.
    fn terror(&mut self, n: NodeId, tag: &str, out: &dyn Target) {
        let node = self.tree.node(n);
        let tag = if node.tag.is_empty() { tag } else { &node.tag };
        let value = (tag != SEQ && tag != MAP).then(|| {
            let v = node.value.as_bytes();
            if v.len() > 10 {
                let mut short = v[..7].to_vec();
                short.extend_from_slice(b"...");
                short
            } else {
                v.to_vec()
            }
        });
        self.terrors.push(TypeError::CannotUnmarshal {
            line: node.line,
            tag: tag.to_string(),
            value,
            go_type: out.go_type(),
        });
    }

    fn scalar(&mut self, n: NodeId, out: &mut dyn Target) -> Result<bool, Fatal> {
        let node = self.tree.node(n);
        let (tag, resolved) = if node.indicated_string() {
            (STR.to_string(), Resolved::Str(node.value.clone()))
        } else {
            let r = resolve(&node.tag, &node.value).map_err(Fatal::Fail)?;
            match r {
                Resolved::Other(ref tag, ref text) if tag == BINARY => {
                    let Some(bytes) = yaml::decode_base64(text) else {
                        return Err(Fatal::Fail(
                            "!!binary value contains invalid base64 data".into(),
                        ));
                    };
                    // Go keeps the bytes in a string whatever they are.
                    let s = String::from_utf8_lossy(&bytes).into_owned();
                    (BINARY.to_string(), Resolved::Str(s))
                }
                r => (r.tag().to_string(), r),
            }
        };
        if resolved == Resolved::Null {
            return Ok(out.null());
        }
        let text = match &resolved {
            Resolved::Str(s) if tag == BINARY => s.clone(),
            _ => node.value.clone(),
        };
        if out.scalar(&resolved, &text) {
            return Ok(true);
        }
        self.terror(n, &tag, out);
        Ok(false)
    }

    fn sequence(&mut self, n: NodeId, out: &mut dyn Target) -> Result<bool, Fatal> {
        match out.sequence(self, n)? {
            Some(good) => Ok(good),
            None => {
                self.terror(n, SEQ, out);
                Ok(false)
            }
        }
    }

    /// Decodes every item of list `n` into a new `T`, keeping those that
    /// decoded (yaml.v3 drops the others).
    pub fn items<T: Target + Default>(&mut self, n: NodeId) -> Result<Vec<T>, Fatal> {
        let mut out = Vec::new();
        for &item in &self.tree.node(n).content {
            let mut e = T::default();
            if self.unmarshal(item, &mut e)? {
                out.push(e);
            }
        }
        Ok(out)
    }

    fn mapping(&mut self, n: NodeId, out: &mut dyn Target) -> Result<bool, Fatal> {
        let content = &self.tree.node(n).content;
        let before = self.terrors.len();
        for i in (0..content.len()).step_by(2) {
            let ni = self.tree.node(content[i]);
            for j in (i + 2..content.len()).step_by(2) {
                let nj = self.tree.node(content[j]);
                if ni.kind == nj.kind && ni.value == nj.value {
                    self.terrors.push(TypeError::Duplicate {
                        line: nj.line,
                        key: nj.value.clone(),
                        first_line: ni.line,
                    });
                }
            }
        }
        if self.terrors.len() > before {
            return Ok(false);
        }
        match out.mapping(self, n)? {
            Some(good) => Ok(good),
            None => {
                self.terror(n, MAP, out);
                Ok(false)
            }
        }
    }

    /// The key/value pairs of mapping `n`, a merge key's value apart.
    fn pairs(&self, n: NodeId) -> (Vec<(NodeId, NodeId)>, Option<NodeId>) {
        let content = &self.tree.node(n).content;
        let mut pairs = Vec::new();
        let mut merge = None;
        for kv in content.chunks(2) {
            let (k, v) = (kv[0], kv.get(1).copied().unwrap_or(kv[0]));
            if self.is_merge(k) {
                merge = Some(v);
            } else {
                pairs.push((k, v));
            }
        }
        (pairs, merge)
    }

    fn is_merge(&self, k: NodeId) -> bool {
        let node = self.tree.node(k);
        node.kind == Kind::Scalar && node.value == "<<" && node.tag == MERGE
    }

    /// yaml.v3's `mappingStruct`.
    pub fn mapping_struct(&mut self, n: NodeId, out: &mut dyn Struct) -> Result<bool, Fatal> {
        let mut merged = self.merged_fields.take();
        let (pairs, merge) = self.pairs(n);
        let names = out.field_names();
        let mut done = vec![false; names.len()];
        for (k, v) in pairs {
            let mut name = String::new();
            if !self.unmarshal(k, &mut name)? {
                continue;
            }
            if let Some(merged) = merged.as_mut()
                && !merged.insert(name.clone())
            {
                continue;
            }
            if let Some(i) = names.iter().position(|f| *f == name) {
                if done[i] {
                    self.terrors.push(TypeError::AlreadySet {
                        line: self.tree.node(k).line,
                        name,
                        go_type: out.go_type(),
                    });
                    continue;
                }
                done[i] = true;
                self.unmarshal(v, out.field(i))?;
            } else if self.known_fields {
                self.terrors.push(TypeError::UnknownField {
                    line: self.tree.node(k).line,
                    name,
                    go_type: out.go_type(),
                });
            }
        }
        self.merged_fields = merged;
        if let Some(m) = merge {
            self.merge(n, m, &mut |d, node| d.unmarshal(node, out))?;
        }
        Ok(true)
    }

    /// yaml.v3's `mapping` into a map[string]float64 (a workload's mix).
    pub fn mapping_map(
        &mut self,
        n: NodeId,
        out: &mut std::collections::BTreeMap<String, f64>,
        is_new: bool,
    ) -> Result<bool, Fatal> {
        let mut merged = self.merged_fields.take();
        let (pairs, merge) = self.pairs(n);
        for (k, v) in pairs {
            let mut key = String::new();
            if !self.unmarshal(k, &mut key)? {
                continue;
            }
            if let Some(merged) = merged.as_mut()
                && !merged.insert(key.clone())
            {
                continue;
            }
            let mut e = 0.0f64;
            let good = self.unmarshal(v, &mut e)?;
            let null = self.tree.short_tag(v) == NULL;
            if good || (null && (is_new || !out.contains_key(&key))) {
                out.insert(key, e);
            }
        }
        self.merged_fields = merged;
        if let Some(m) = merge {
            self.merge(n, m, &mut |d, node| {
                let mut inner = MergeInto(out);
                d.unmarshal(node, &mut inner)
            })?;
        }
        Ok(true)
    }

    /// yaml.v3's `merge`: decodes the mapping(s) of a merge key into the
    /// same target, skipping keys already given.
    fn merge(
        &mut self,
        parent: NodeId,
        merge: NodeId,
        into: &mut dyn FnMut(&mut Self, NodeId) -> Result<bool, Fatal>,
    ) -> Result<(), Fatal> {
        let saved = self.merged_fields.clone();
        if saved.is_none() {
            let mut keys = BTreeSet::new();
            let content = self.tree.node(parent).content.clone();
            for &k in content.iter().step_by(2) {
                if let Some(key) = self.decode_any(k)? {
                    match key {
                        Any::Str(s) => {
                            keys.insert(s);
                        }
                        Any::Seq(_) => return Err(unhashable("[]interface {}")),
                        Any::Map { strings: true } => {
                            return Err(unhashable("map[string]interface {}"));
                        }
                        Any::Map { strings: false } => {
                            return Err(unhashable("map[interface {}]interface {}"));
                        }
                        Any::Null | Any::Scalar(_) => {}
                    }
                }
            }
            self.merged_fields = Some(keys);
        }
        let want_map =
            || Fatal::Fail("map merge requires map or sequence of maps as the value".into());
        let is_map = |d: &Self, id: NodeId| {
            let node = d.tree.node(id);
            match node.kind {
                Kind::Alias => node
                    .alias
                    .is_none_or(|a| d.tree.node(a).kind == Kind::Mapping),
                kind => kind == Kind::Mapping,
            }
        };
        match self.tree.node(merge).kind {
            Kind::Mapping | Kind::Alias => {
                if !is_map(self, merge) {
                    return Err(want_map());
                }
                into(self, merge)?;
            }
            Kind::Sequence => {
                for item in self.tree.node(merge).content.clone() {
                    if !is_map(self, item) {
                        return Err(want_map());
                    }
                    into(self, item)?;
                }
            }
            _ => return Err(want_map()),
        }
        self.merged_fields = saved;
        Ok(())
    }

    /// Decodes node `n` into Go's `interface{}`, as yaml.v3 decodes the
    /// keys of a mapping before merging into it. None when it does not
    /// decode.
    fn decode_any(&mut self, n: NodeId) -> Result<Option<Any>, Fatal> {
        if self.any_depth >= MAX_ANY_DEPTH {
            return Err(Fatal::Fail(format!(
                "exceeded max depth of {MAX_ANY_DEPTH}"
            )));
        }
        let mut out = AnyTarget(None);
        self.any_depth += 1;
        let good = self.unmarshal(n, &mut out);
        self.any_depth -= 1;
        if good? {
            Ok(Some(out.0.unwrap_or(Any::Null)))
        } else {
            Ok(None)
        }
    }
}

fn unhashable(go_type: &str) -> Fatal {
    Fatal::Fail(format!("runtime error: hash of unhashable type {go_type}"))
}

/// A mix map being merged into (not new: a null value does not replace a
/// key it already has).
struct MergeInto<'m>(&'m mut std::collections::BTreeMap<String, f64>);

impl Target for MergeInto<'_> {
    fn go_type(&self) -> String {
        "map[string]float64".into()
    }
    fn null(&mut self) -> bool {
        self.0.clear();
        true
    }
    fn mapping(&mut self, d: &mut Decoder, n: NodeId) -> Result<Option<bool>, Fatal> {
        d.mapping_map(n, self.0, false).map(Some)
    }
}

/// Go's `interface{}`.
struct AnyTarget(Option<Any>);

impl Target for AnyTarget {
    fn go_type(&self) -> String {
        "interface {}".into()
    }
    fn scalar(&mut self, r: &Resolved, text: &str) -> bool {
        self.0 = Some(match r {
            Resolved::Str(_) => Any::Str(text.to_string()),
            Resolved::Other(_, _) => Any::Str(text.to_string()),
            r => Any::Scalar(r.clone()),
        });
        true
    }
    fn null(&mut self) -> bool {
        self.0 = Some(Any::Null);
        true
    }
    fn sequence(&mut self, d: &mut Decoder, n: NodeId) -> Result<Option<bool>, Fatal> {
        let mut items = Vec::new();
        for item in d.tree.node(n).content.clone() {
            if let Some(e) = d.decode_any(item)? {
                items.push(e);
            }
        }
        self.0 = Some(Any::Seq(items));
        Ok(Some(true))
    }
    fn mapping(&mut self, d: &mut Decoder, n: NodeId) -> Result<Option<bool>, Fatal> {
        let content = d.tree.node(n).content.clone();
        let strings = content
            .iter()
            .step_by(2)
            .all(|&k| matches!(d.tree.short_tag(k), STR | MERGE));
        let merged = d.merged_fields.take();
        let (pairs, merge) = d.pairs(n);
        for (k, v) in pairs {
            let key = if strings {
                let mut s = String::new();
                if !d.unmarshal(k, &mut s)? {
                    continue;
                }
                Any::Str(s)
            } else {
                match d.decode_any(k)? {
                    Some(key) => key,
                    None => continue,
                }
            };
            if matches!(key, Any::Seq(_) | Any::Map { .. }) {
                // Go prints the key with %#v; this names only its kind.
                return Err(Fatal::Fail(format!("invalid map key: {key:?}")));
            }
            if let (Some(merged), Any::Str(s)) = (merged.as_ref(), &key)
                && merged.contains(s)
            {
                continue;
            }
            d.decode_any(v)?;
        }
        d.merged_fields = merged;
        if let Some(m) = merge {
            d.merge(n, m, &mut |d, node| Ok(d.decode_any(node)?.is_some()))?;
        }
        self.0 = Some(Any::Map { strings });
        Ok(Some(true))
    }
}

impl Target for String {
    fn go_type(&self) -> String {
        "string".into()
    }
    fn scalar(&mut self, _r: &Resolved, text: &str) -> bool {
        *self = text.to_string();
        true
    }
}

impl Target for bool {
    fn go_type(&self) -> String {
        "bool".into()
    }
    fn scalar(&mut self, r: &Resolved, _text: &str) -> bool {
        // yaml.v3 reads YAML 1.1's words for booleans into a bool field.
        let v = match r {
            Resolved::Bool(b) => *b,
            Resolved::Str(s) | Resolved::Other(_, s) => match s.as_str() {
                "y" | "Y" | "yes" | "Yes" | "YES" | "on" | "On" | "ON" => true,
                "n" | "N" | "no" | "No" | "NO" | "off" | "Off" | "OFF" => false,
                _ => return false,
            },
            _ => return false,
        };
        *self = v;
        true
    }
}

impl Target for f64 {
    fn go_type(&self) -> String {
        "float64".into()
    }
    fn scalar(&mut self, r: &Resolved, _text: &str) -> bool {
        *self = match r {
            Resolved::Int(v) => *v as f64,
            Resolved::Uint(v) => *v as f64,
            Resolved::Float(v) => *v,
            _ => return false,
        };
        true
    }
}

/// A Go slice.
impl<T: Target + Default> Target for Vec<T> {
    fn go_type(&self) -> String {
        format!("[]{}", T::default().go_type())
    }
    fn null(&mut self) -> bool {
        self.clear();
        true
    }
    fn sequence(&mut self, d: &mut Decoder, n: NodeId) -> Result<Option<bool>, Fatal> {
        *self = d.items(n)?;
        Ok(Some(true))
    }
}

/// A Go map[string]float64.
impl Target for std::collections::BTreeMap<String, f64> {
    fn go_type(&self) -> String {
        "map[string]float64".into()
    }
    fn null(&mut self) -> bool {
        self.clear();
        true
    }
    fn mapping(&mut self, d: &mut Decoder, n: NodeId) -> Result<Option<bool>, Fatal> {
        d.mapping_map(n, self, true).map(Some)
    }
}
