//! The simulators: worlds that drive the engine in simulated time. The fill
//! experiment (FGD's protocol on the Alibaba trace) is here; the mixed
//! inference-and-training week comes with the scheduling cycle.

pub mod fill;
