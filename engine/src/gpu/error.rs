use thiserror::Error;

use super::{COMPUTE_SLICES, MEMORY_SLICES, Placement};
use crate::numfmt::format_g;
use crate::quote::quote;

/// Why a question about GPU models, MIG profiles or layouts has no answer.
/// The texts are the Go build's, word for word.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum GpuError {
    /// A catalog model without MIG was asked for MIG geometry.
    #[error("model {} does not support MIG", quote(.model))]
    NoMig { model: String },
    /// A model not in the catalog (so without MIG) was asked for MIG geometry.
    #[error("model {} is not in the GPU catalog, so it does not support MIG", quote(.model))]
    NotInCatalog { model: String },
    /// The model has no profile of that name.
    #[error("unknown MIG profile {} for {model} (known: {known})", quote(.profile))]
    UnknownProfile {
        model: String,
        profile: String,
        /// The model's profile names, joined by ", ".
        known: String,
    },

    /// An instance of a layout names a profile the model lacks.
    #[error("{placement}: {source}")]
    InPlacement {
        placement: Placement,
        source: Box<GpuError>,
    },
    /// An instance starts where its profile may not.
    #[error("{placement}: start {} not allowed (allowed: {allowed})", .placement.start)]
    StartNotAllowed {
        placement: Placement,
        /// The profile's starts, joined by ",".
        allowed: String,
    },
    /// Two instances of a layout share a memory slice.
    #[error("{placement} overlaps {other}")]
    Overlap {
        placement: Placement,
        other: Placement,
    },
    /// A second instance owning the media engines.
    #[error(
        "{placement}: at most one +me instance per GPU, and {other} already has the media engines"
    )]
    SecondMediaExt {
        placement: Placement,
        other: Placement,
    },
    /// More instances of one profile than a GPU allows.
    #[error("{placement}: at most {max} {profile} per GPU")]
    TooMany {
        placement: Placement,
        max: i32,
        profile: String,
    },
    /// The compute slices of a layout add up to more than a GPU has.
    #[error("{placement}: compute slices would add up to {total}, more than {COMPUTE_SLICES}")]
    ComputeOver { placement: Placement, total: i32 },
    /// The layout a free placement was asked against is itself invalid.
    #[error("used layout: {0}")]
    UsedLayout(Box<GpuError>),

    /// `Model::profile_for` was given a negative peak.
    #[error("peak memory {0} MiB is negative")]
    NegativePeak(i64),
    /// `Model::profile_for` was given a compute share that is not a number >= 0.
    #[error("compute share {} must be a number from 0 to 1", format_g(*.0, None))]
    BadComputeShare(f64),
    /// `Model::profile_for` was given a headroom that is not a finite number >= 0.
    #[error("memory headroom {} must be a finite number >= 0", format_g(*.0, None))]
    BadHeadroom(f64),
    /// Every profile of the model owns the media engines, which
    /// `Model::profile_for` never picks.
    #[error("no MIG profile fits: {model} has only +me profiles")]
    OnlyMediaExt { model: String },
    /// No profile of the model is big enough.
    #[error(
        "no MIG profile fits: {model} needs {need:.0} MiB ({peak_mib} MiB peak + {headroom_percent:.0}% headroom) and {compute:.2} of the compute; the largest profile, {largest}, has {largest_mib} MiB and {largest_share:.2}"
    )]
    NoFit {
        model: String,
        need: f64,
        peak_mib: i64,
        headroom_percent: f64,
        compute: f64,
        largest: String,
        largest_mib: i64,
        largest_share: f64,
    },

    /// A placement's text is not `<profile>@<start>`.
    #[error("placement {}: want <profile>@<start>, e.g. 3g.40gb@4", quote(.text))]
    PlacementSyntax { text: String },
    /// A placement's profile holds a character profile names never do.
    #[error(
        "placement {}: profile {} may hold only letters, digits, '.', '+', '-' and '_'",
        quote(.text),
        quote(.profile)
    )]
    ProfileSyntax { text: String, profile: String },
    /// A placement's start is not a memory-slice index.
    #[error(
        "placement {}: start {} is not a memory-slice index from 0 to {}",
        quote(.text),
        quote(.start),
        MEMORY_SLICES - 1
    )]
    StartSyntax { text: String, start: String },
    /// A layout's text has an empty placement between commas.
    #[error("layout {}: placement {number} is empty", quote(.text))]
    EmptyPlacement { text: String, number: usize },
    /// A layout's text has a bad placement.
    #[error("layout {}: {source}", quote(.text))]
    InLayout { text: String, source: Box<GpuError> },
}

impl GpuError {
    /// Whether the error comes from asking a model without MIG (or an
    /// unknown model) for MIG geometry: Go's `errors.Is(err, ErrNoMIG)`.
    pub fn is_no_mig(&self) -> bool {
        match self {
            GpuError::NoMig { .. } | GpuError::NotInCatalog { .. } => true,
            GpuError::InPlacement { source, .. }
            | GpuError::InLayout { source, .. }
            | GpuError::UsedLayout(source) => source.is_no_mig(),
            _ => false,
        }
    }

    /// Whether `Model::profile_for` found no profile big enough: Go's
    /// `errors.Is(err, ErrNoFit)`. Callers fall back to a whole GPU on it.
    pub fn is_no_fit(&self) -> bool {
        matches!(self, GpuError::OnlyMediaExt { .. } | GpuError::NoFit { .. })
    }
}
