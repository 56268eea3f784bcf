"""Discrete-event simulator of an admission queue on a virtual clock (``sjf simulate``).

It drives the very same :class:`~sjf_core.policy._policies.Policy`, pending structures and
:class:`~sjf_core.admission._overload.OverloadControl` objects as the live queues: they take
``now`` explicitly, and the simulator passes its virtual time (nothing sleeps).

* :mod:`.workload`: Poisson (M/G/k) or burst arrivals, Gamma service times per
  class calibrated to paper Table 1.
* :mod:`.noise`: predictor models (ranking accuracy, multiplicative error, oracle).
* :mod:`.engine`: the event loop and per-class latency metrics.
* :mod:`.experiments`: the paper's sweeps (Table 10, Figures 3–4), τ variants,
  bursts, predictor noise, default selection.
* :mod:`.plots`: matplotlib figures (Agg backend).
"""

from sjf_lab.sim.engine import SimResult, simulate
from sjf_lab.sim.noise import PredictorModel
from sjf_lab.sim.workload import Workload, WorkloadSpec, burst_workload, poisson_workload

__all__ = ["simulate", "SimResult", "PredictorModel", "Workload", "WorkloadSpec", "poisson_workload", "burst_workload"]
