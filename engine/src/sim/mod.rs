//! The simulators: worlds that drive the engine in simulated time. The fill
//! experiment (FGD's protocol on the Alibaba trace) and the mixed
//! inference-and-training week (the scheduling cycle under a scenario's
//! job stream) are here, with the event queue they run on.

pub mod events;
pub mod fill;
pub mod mixed;
