//! Where each field sits in the file (the Go build's errors.go), and the
//! rewriting of yaml.v3's errors into `file:line: field: what is wrong`.
//!
//! yaml.v3 reports problems with a line only, and validation knows only a
//! field's path; the index maps paths to lines and back, so that every
//! error can name both. It also tells which fields the file gives, so that
//! a missing field can be told from a zero one.

use std::collections::BTreeMap;

use super::Error;
use super::decode::{Fatal, TypeError};
use super::raw::known_fields;
use super::yaml::{Kind, MAP, MERGE, NodeId, SEQ, SyntaxError, Tree};
use crate::quote::go_quote;

/// How deep the index follows the document. The schema is at most five
/// levels deep (workloads[0].arrival.at[3]); a deeper document is refused
/// by the strict decode anyway, and following it would cost memory
/// quadratic in its depth.
const MAX_INDEX_DEPTH: usize = 8;

/// Bounds the index: merge keys can make a small file stand for an
/// exponentially large tree.
const MAX_INDEX_ENTRIES: usize = 100_000;

/// Where a key or value sits in the file.
#[derive(Debug, Clone)]
struct Position {
    line: usize,
    column: usize,
    path: String,
    /// The key, or the scalar value.
    text: String,
    /// Of the value.
    kind: Kind,
}

/// Field paths to lines and back.
#[derive(Debug, Clone, Default)]
pub(crate) struct Index {
    /// Path -> line of its key, or of the item in a list.
    pub lines: BTreeMap<String, usize>,
    keys: Vec<Position>,
    values: Vec<Position>,
}

impl Index {
    pub fn new(tree: &Tree) -> Index {
        let mut ix = Index::default();
        if !tree.nodes.is_empty() {
            ix.walk(tree, 0, "", 0);
        }
        ix
    }

    fn walk(&mut self, tree: &Tree, n: NodeId, path: &str, depth: usize) {
        if depth > MAX_INDEX_DEPTH || self.values.len() >= MAX_INDEX_ENTRIES {
            return;
        }
        let node = tree.node(n);
        match node.kind {
            Kind::Document => {
                for &c in &node.content {
                    self.walk(tree, c, path, depth);
                }
            }
            Kind::Mapping => {
                for kv in node.content.chunks(2) {
                    let [k, v] = [kv[0], kv.get(1).copied().unwrap_or(kv[0])];
                    let key = tree.node(k);
                    if key.kind == Kind::Scalar && key.tag == MERGE {
                        self.merge(tree, v, path, depth);
                        continue;
                    }
                    let p = if path.is_empty() {
                        key.value.clone()
                    } else {
                        format!("{path}.{}", key.value)
                    };
                    self.record(tree, &p, k, v);
                    self.walk(tree, v, &p, depth + 1);
                }
            }
            Kind::Sequence => {
                for (i, &item) in node.content.iter().enumerate() {
                    let p = format!("{path}[{i}]");
                    self.record(tree, &p, item, item);
                    self.walk(tree, item, &p, depth + 1);
                }
            }
            Kind::Scalar | Kind::Alias => {}
        }
    }

    /// Indexes the fields a merge key (`<<: *defaults`) brings into the
    /// mapping at `path`, as the decoder will see them.
    fn merge(&mut self, tree: &Tree, v: NodeId, path: &str, depth: usize) {
        let node = tree.node(v);
        match node.kind {
            Kind::Alias => {
                if let Some(target) = node.alias
                    && depth < MAX_INDEX_DEPTH
                    && self.values.len() < MAX_INDEX_ENTRIES
                {
                    self.merge(tree, target, path, depth + 1);
                }
            }
            Kind::Mapping => self.walk(tree, v, path, depth),
            Kind::Sequence => {
                for &item in &node.content {
                    if depth < MAX_INDEX_DEPTH && self.values.len() < MAX_INDEX_ENTRIES {
                        self.merge(tree, item, path, depth + 1);
                    }
                }
            }
            _ => {}
        }
    }

    fn record(&mut self, tree: &Tree, path: &str, key: NodeId, value: NodeId) {
        let (k, v) = (tree.node(key), tree.node(value));
        self.lines.entry(path.to_string()).or_insert(k.line);
        self.keys.push(Position {
            line: k.line,
            column: k.column,
            path: path.to_string(),
            text: k.value.clone(),
            kind: k.kind,
        });
        self.values.push(Position {
            line: v.line,
            column: v.column,
            path: path.to_string(),
            text: v.value.clone(),
            kind: v.kind,
        });
    }

    /// The path of the position at `line` (and `column`, when not 0) whose
    /// text is `text` (any text when None).
    fn find(ps: &[Position], line: usize, column: usize, text: Option<&str>) -> String {
        ps.iter()
            .find(|p| {
                p.line == line
                    && (column == 0 || p.column == column)
                    && text.is_none_or(|t| p.text == t)
            })
            .map(|p| p.path.clone())
            .unwrap_or_default()
    }

    /// The path of the value at `line` with yaml.v3's tag and (shortened)
    /// text.
    fn find_value(&self, line: usize, tag: &str, prefix: &[u8]) -> String {
        let kind = match tag {
            MAP => Kind::Mapping,
            SEQ => Kind::Sequence,
            _ => Kind::Scalar,
        };
        self.values
            .iter()
            .find(|p| p.line == line && p.kind == kind && p.text.as_bytes().starts_with(prefix))
            .map(|p| p.path.clone())
            .unwrap_or_default()
    }

    /// The full text of the value at `path` (yaml.v3 shortens it).
    fn value(&self, path: &str, short: &[u8]) -> Vec<u8> {
        if !path.is_empty()
            && let Some(p) = self.values.iter().find(|p| p.path == path)
        {
            return p.text.as_bytes().to_vec();
        }
        short.to_vec()
    }

    /// A decoding error as an Error naming the field. yaml.v3 reports
    /// only lines, so the field is found by matching the key or value text
    /// on that line against the index.
    pub fn decode_error(
        &self,
        file: &str,
        fatal: Option<&Fatal>,
        first: Option<&TypeError>,
    ) -> Error {
        let plain = |line: usize, message: String| Error {
            file: file.to_string(),
            line,
            field: String::new(),
            message,
        };
        match (fatal, first) {
            (
                Some(Fatal::Leaf {
                    line,
                    column,
                    message,
                }),
                _,
            ) => Error {
                file: file.to_string(),
                line: *line,
                field: Index::find(&self.values, *line, *column, None),
                message: message.clone(),
            },
            (Some(Fatal::Fail(message)), _) => plain(0, message.clone()),
            (None, Some(te)) => self.type_error(file, te),
            (None, None) => plain(0, String::new()),
        }
    }

    fn type_error(&self, file: &str, te: &TypeError) -> Error {
        let at = |line: usize, field: String, message: String| Error {
            file: file.to_string(),
            line,
            field,
            message,
        };
        // The Go build matches yaml.v3's message with regular expressions
        // whose `.` stops at a line break: a key or value with one in it
        // leaves the message as yaml.v3 wrote it.
        let unmatched = || at(0, String::new(), te.message());
        match te {
            TypeError::UnknownField {
                line,
                name,
                go_type,
            } => {
                if name.contains('\n') {
                    return unmatched();
                }
                let field = Index::find(&self.keys, *line, 0, Some(name));
                let known = known_fields(go_type).join(", ");
                at(*line, field, format!("unknown field (known here: {known})"))
            }
            TypeError::Duplicate {
                line,
                key,
                first_line,
            } => {
                // The regular expression reads the key as yaml.v3 quotes it,
                // so a key with escapes matches no key text.
                let quoted = go_quote(key.as_bytes());
                let inner = &quoted[1..quoted.len() - 1];
                let field = Index::find(&self.keys, *line, 0, Some(inner));
                at(
                    *line,
                    field,
                    format!("given twice (first at line {first_line})"),
                )
            }
            TypeError::AlreadySet { .. } => unmatched(),
            TypeError::CannotUnmarshal {
                line,
                tag,
                value,
                go_type,
            } => {
                let word_tag = tag.strip_prefix("!!").is_some_and(|t| {
                    !t.is_empty() && t.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_')
                });
                let short = value.as_deref().unwrap_or_default();
                if !word_tag || short.contains(&b'\n') {
                    return unmatched();
                }
                let prefix = short.strip_suffix(b"...").unwrap_or(short);
                let field = self.find_value(*line, tag, prefix);
                let found = match tag.as_str() {
                    MAP => "a mapping".to_string(),
                    SEQ => "a list".to_string(),
                    _ => go_quote(&self.value(&field, short)),
                };
                at(*line, field, format!("{found} is not {}", wanted(go_type)))
            }
        }
    }
}

/// A syntax error as an Error.
pub(crate) fn syntax_error(file: &str, e: &SyntaxError) -> Error {
    Error {
        file: file.to_string(),
        line: e.line,
        field: String::new(),
        message: e.message.clone(),
    }
}

/// A Go type in the words of the schema.
fn wanted(go_type: &str) -> String {
    if go_type.starts_with("[]") {
        "a list".into()
    } else if go_type.starts_with("map[") || go_type.starts_with("scenario.raw") {
        "a mapping".into()
    } else if go_type.starts_with("int") || go_type.starts_with("uint") {
        "a whole number".into()
    } else if go_type.starts_with("float") {
        "a number".into()
    } else if go_type == "bool" {
        "true or false".into()
    } else if go_type == "string" {
        "text".into()
    } else {
        format!("a {go_type}")
    }
}

/// The line of `path`, or of its nearest ancestor in the file (a missing
/// field is reported at its parent); 0 when none is in the file.
pub(crate) fn line_of(lines: &BTreeMap<String, usize>, path: &str) -> usize {
    let mut path = path;
    while !path.is_empty() {
        if let Some(&l) = lines.get(path) {
            return l;
        }
        match path.rfind(['.', '[']) {
            Some(i) => path = &path[..i],
            None => return 0,
        }
    }
    0
}
