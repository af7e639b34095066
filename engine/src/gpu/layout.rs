use std::borrow::Cow;
use std::fmt;
use std::ops::{Deref, DerefMut};

use serde::{Deserialize, Serialize};

use super::{GpuError, MEMORY_SLICES, catalog};

/// One MIG GPU instance: a profile at a start memory slice. Its text form
/// is "3g.40gb@4".
///
/// The profile name is a `Cow` so that a placement of a catalog profile
/// borrows the catalog's `'static` name: placements are copied whenever a
/// node is, and a name that is not copied costs nothing. Only the name of
/// a profile no catalog model has (which no valid layout holds) is owned.
#[derive(Debug, Clone, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Placement {
    pub profile: Cow<'static, str>,
    /// A memory-slice index; `Model::validate` refuses one outside the GPU.
    pub start: i32,
}

/// Equal profile and start, the start compared first and the names by
/// address before bytes (`same_name`): the placement policies compare
/// layouts' placements in their inner loops.
impl PartialEq for Placement {
    fn eq(&self, other: &Placement) -> bool {
        self.start == other.start && same_name(&self.profile, &other.profile)
    }
}

impl std::hash::Hash for Placement {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.profile.hash(state);
        self.start.hash(state);
    }
}

/// Whether two names are equal, looking at their addresses first: a
/// catalog profile's name is borrowed from the catalog wherever it is
/// used (`Placement::new`), so equal names mostly share one address.
pub(crate) fn same_name(a: &str, b: &str) -> bool {
    a.len() == b.len() && (std::ptr::eq(a.as_ptr(), b.as_ptr()) || a == b)
}

impl Placement {
    /// The placement of `profile` at `start`; a catalog profile's name is
    /// borrowed from the catalog whatever form it is given in.
    pub fn new(profile: impl Into<Cow<'static, str>>, start: i32) -> Placement {
        Placement {
            profile: intern(profile.into()),
            start,
        }
    }

    /// Reads `<profile>@<start>`, e.g. "3g.40gb@4", ignoring surrounding
    /// white space. It checks syntax only: whether the profile exists on a
    /// model is `Model::validate`'s job. A profile name is letters, digits
    /// and '.', '+', '-', '_' (so it never holds the ',' and '@' of the text
    /// forms); a start is a memory-slice index, 0-7, in plain decimal digits.
    pub fn parse(s: &str) -> Result<Placement, GpuError> {
        let text = s.trim_matches(is_go_space);
        let (name, start_text) = match text.split_once('@') {
            Some((name, start)) if !name.is_empty() && !start.is_empty() => (name, start),
            _ => {
                return Err(GpuError::PlacementSyntax {
                    text: s.to_string(),
                });
            }
        };
        if !is_profile_name(name) {
            return Err(GpuError::ProfileSyntax {
                text: s.to_string(),
                profile: name.to_string(),
            });
        }
        let Some(start) = parse_start(start_text) else {
            return Err(GpuError::StartSyntax {
                text: s.to_string(),
                start: start_text.to_string(),
            });
        };
        Ok(Placement::new(name.to_string(), start))
    }
}

impl fmt::Display for Placement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}", self.profile, self.start)
    }
}

impl std::str::FromStr for Placement {
    type Err = GpuError;
    fn from_str(s: &str) -> Result<Placement, GpuError> {
        Placement::parse(s)
    }
}

/// `name` borrowed from the catalog when a catalog model has a profile of
/// that name.
fn intern(name: Cow<'static, str>) -> Cow<'static, str> {
    match name {
        Cow::Borrowed(_) => name,
        Cow::Owned(s) => match catalog::static_profile_name(&s) {
            Some(known) => Cow::Borrowed(known),
            None => Cow::Owned(s),
        },
    }
}

/// The white space Go's `strings.TrimSpace` trims: `unicode.IsSpace` is the
/// Unicode White_Space property, as `char::is_whitespace` is.
fn is_go_space(c: char) -> bool {
    c.is_whitespace()
}

fn is_profile_name(s: &str) -> bool {
    s.chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '+' | '-' | '_'))
}

/// Plain decimal digits only (no sign, no spaces), so that the text form
/// has one spelling per value, give or take leading zeros.
fn parse_start(s: &str) -> Option<i32> {
    let mut n = 0;
    for c in s.chars() {
        if !c.is_ascii_digit() {
            return None;
        }
        n = n * 10 + (c as i32 - '0' as i32);
        if n >= MEMORY_SLICES {
            return None;
        }
    }
    Some(n)
}

/// The set of MIG instances on one GPU. It derefs to its `Vec`, and the
/// functions that read layouts take `&[Placement]`, so a borrowed part of
/// a layout or a caller's buffer serves as well.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Layout(pub Vec<Placement>);

impl Layout {
    /// The empty layout.
    pub fn new() -> Layout {
        Layout(Vec::new())
    }

    /// Reads comma-separated placements, "3g.40gb@0,2g.20gb@4"; spaces
    /// around each are ignored. An empty (or all-blank) string is the empty
    /// layout.
    pub fn parse(s: &str) -> Result<Layout, GpuError> {
        if s.trim_matches(is_go_space).is_empty() {
            return Ok(Layout::new());
        }
        let mut l = Vec::new();
        for (i, part) in s.split(',').enumerate() {
            if part.trim_matches(is_go_space).is_empty() {
                return Err(GpuError::EmptyPlacement {
                    text: s.to_string(),
                    number: i + 1,
                });
            }
            let p = Placement::parse(part).map_err(|e| GpuError::InLayout {
                text: s.to_string(),
                source: Box::new(e),
            })?;
            l.push(p);
        }
        Ok(Layout(l))
    }

    /// The text form `Layout::parse` reads of any list of placements.
    pub fn text(l: &[Placement]) -> String {
        let mut out = String::new();
        for (i, p) in l.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(&p.profile);
            out.push('@');
            out.push_str(&p.start.to_string());
        }
        out
    }
}

impl fmt::Display for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&Layout::text(&self.0))
    }
}

impl std::str::FromStr for Layout {
    type Err = GpuError;
    fn from_str(s: &str) -> Result<Layout, GpuError> {
        Layout::parse(s)
    }
}

impl Deref for Layout {
    type Target = Vec<Placement>;
    fn deref(&self) -> &Vec<Placement> {
        &self.0
    }
}

impl DerefMut for Layout {
    fn deref_mut(&mut self) -> &mut Vec<Placement> {
        &mut self.0
    }
}

impl From<Vec<Placement>> for Layout {
    fn from(v: Vec<Placement>) -> Layout {
        Layout(v)
    }
}

impl FromIterator<Placement> for Layout {
    fn from_iter<I: IntoIterator<Item = Placement>>(iter: I) -> Layout {
        Layout(iter.into_iter().collect())
    }
}

impl IntoIterator for Layout {
    type Item = Placement;
    type IntoIter = std::vec::IntoIter<Placement>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

impl<'a> IntoIterator for &'a Layout {
    type Item = &'a Placement;
    type IntoIter = std::slice::Iter<'a, Placement>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::tests::check_err;

    #[test]
    fn parse_placement() {
        let p = |name: &'static str, start| Placement::new(name, start);
        let cases: Vec<(&str, &str, Option<Placement>, &str)> = vec![
            (
                "reads profile and start",
                "3g.40gb@4",
                Some(p("3g.40gb", 4)),
                "",
            ),
            (
                "reads a +me profile",
                "1g.10gb+me@0",
                Some(p("1g.10gb+me", 0)),
                "",
            ),
            (
                "ignores surrounding spaces",
                " 2g.20gb@2 ",
                Some(p("2g.20gb", 2)),
                "",
            ),
            (
                "reads a leading zero",
                "1g.10gb@06",
                Some(p("1g.10gb", 6)),
                "",
            ),
            (
                "rejects a missing @",
                "3g.40gb",
                None,
                r#"placement "3g.40gb": want <profile>@<start>"#,
            ),
            (
                "rejects a missing profile",
                "@4",
                None,
                "want <profile>@<start>",
            ),
            (
                "rejects a missing start",
                "3g.40gb@",
                None,
                "want <profile>@<start>",
            ),
            (
                "rejects a start past the last slice",
                "3g.40gb@8",
                None,
                r#"start "8" is not a memory-slice index from 0 to 7"#,
            ),
            (
                "rejects a negative start",
                "3g.40gb@-1",
                None,
                r#"start "-1" is not a memory-slice index"#,
            ),
            (
                "rejects a signed start",
                "3g.40gb@+1",
                None,
                r#"start "+1" is not a memory-slice index"#,
            ),
            ("rejects a second @", "3g.40gb@4@4", None, r#"start "4@4""#),
            (
                "rejects a comma in the profile",
                "3g,40gb@4",
                None,
                r#"profile "3g,40gb" may hold only"#,
            ),
            (
                "rejects spaces inside",
                "3g.40gb @4",
                None,
                r#"profile "3g.40gb " may hold only"#,
            ),
            (
                "rejects a non-ASCII digit",
                "3g.40gb@٣",
                None,
                "is not a memory-slice index",
            ),
        ];
        for (name, input, want, want_err) in cases {
            let got = Placement::parse(input);
            check_err(name, got.as_ref().err(), want_err);
            assert_eq!(got.ok(), want, "{name}");
        }
    }

    #[test]
    fn parse_layout() {
        let cases = [
            ("reads the empty string as the empty layout", "", "", 0, ""),
            ("reads blanks as the empty layout", "  ", "", 0, ""),
            ("reads one placement", "7g.80gb@0", "7g.80gb@0", 1, ""),
            (
                "reads several placements with spaces",
                "4g.40gb@0, 2g.20gb@4 ,1g.10gb@6",
                "4g.40gb@0,2g.20gb@4,1g.10gb@6",
                3,
                "",
            ),
            (
                "rejects an empty placement",
                "4g.40gb@0,,1g.10gb@6",
                "",
                0,
                r#"layout "4g.40gb@0,,1g.10gb@6": placement 2 is empty"#,
            ),
            (
                "rejects a trailing comma",
                "4g.40gb@0,",
                "",
                0,
                "placement 2 is empty",
            ),
            (
                "names the bad placement",
                "4g.40gb@0,2g.20gb",
                "",
                0,
                r#"placement "2g.20gb": want <profile>@<start>"#,
            ),
        ];
        for (name, input, want, want_len, want_err) in cases {
            let got = Layout::parse(input);
            check_err(name, got.as_ref().err(), want_err);
            let got = got.unwrap_or_default();
            assert_eq!(
                (got.to_string().as_str(), got.len()),
                (want, want_len),
                "{name}"
            );
        }
    }

    #[test]
    fn layout_json_is_a_list_of_profile_and_start() {
        let l = Layout(vec![
            Placement::new("3g.40gb", 0),
            Placement::new("2g.20gb", 4),
        ]);
        let json = serde_json::to_string(&l).unwrap();
        assert_eq!(
            json,
            r#"[{"profile":"3g.40gb","start":0},{"profile":"2g.20gb","start":4}]"#
        );
        assert_eq!(serde_json::from_str::<Layout>(&json).unwrap(), l);
        assert_eq!(serde_json::to_string(&Layout::new()).unwrap(), "[]");
    }

    #[test]
    fn catalog_profile_names_are_borrowed_not_copied() {
        let parsed = Placement::parse("3g.40gb@4").unwrap();
        assert!(matches!(parsed.profile, Cow::Borrowed(_)), "{parsed:?}");
        let unknown = Placement::parse("5g.50gb@0").unwrap();
        assert!(matches!(unknown.profile, Cow::Owned(_)), "{unknown:?}");
    }
}
