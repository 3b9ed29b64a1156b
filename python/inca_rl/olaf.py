"""OLAF's worker and parameter-server transports for your own agent.

A worker sends gradients (numpy arrays, torch tensors, anything that
converts to float32) as OLAF UPDATEs, through an OLAF switch
(`inca-switchd --program olaf`) or straight to the PS, with OLAF's send
control deciding whether each one goes; it receives ACKs (the feedback) and
MODELs. The PS applies each update through your callback, ACKs it and sends
the current model back. docs/rl.md, "Your own agent"; a torch example is
python/examples/olaf/torch_agent.py.

    from inca_rl import olaf
    ps = olaf.ParameterServer(apply=lambda u: step(u["values"]), model=lambda: params)
    w = olaf.Worker(ps.address)              # or the switch's HOST:PORT
    w.send(grad, model_version=0)            # -> {'sent': True, 'probability': 1.0, ...}
    ps.poll(10); w.poll(10)
    w.latest_model()                         # -> {'version': 1, 'values': array, ...}
"""
import numpy as np

from . import _olaf

UNASSIGNED_CLUSTER = _olaf.UNASSIGNED_CLUSTER

__all__ = ["Worker", "ParameterServer", "as_f32", "UNASSIGNED_CLUSTER"]


def as_f32(x):
    """A flat, contiguous float32 numpy view or copy of `x` (a torch tensor,
    on any device, with or without grad; a numpy array; a sequence)."""
    if hasattr(x, "detach"):  # torch.Tensor, without importing torch
        x = x.detach().to("cpu").reshape(-1).float().contiguous().numpy()
    return np.ascontiguousarray(np.asarray(x, dtype=np.float32).reshape(-1))


class Worker(_olaf.Worker):
    """An OLAF worker on a UDP socket. `peer` is the switch (or the PS)
    "HOST:PORT". Keywords: bind, cluster (None: the switch's cluster table
    decides), worker_id (0: the switch stamps it), send_control
    ('off' | 'priority' | 'fairness'), delta_t_ms (ΔT), clock ('ps': stamp
    updates on the PS's clock, right across hosts; 'local'), model_elements
    (> 0: reject models of another length), seed, max_payload_bytes."""

    def send(self, grad, model_version):
        """Generates an update from `grad` (computed on `model_version`) and
        sends it if send control agrees."""
        return super().send(as_f32(grad), int(model_version))


class ParameterServer(_olaf.ParameterServer):
    """An OLAF PS on a UDP socket. apply(update) is called for every applied
    update (a dict: values float32, cluster, worker_id, model_version,
    new_model_version, merged_count, gen_time_ns, element_offset, ...);
    model() returns the current parameters for the MODELs sent back.
    Keywords: bind, granularity ('update' | 'fragment'), model_policy
    ('none' | 'updated_cluster' | 'last_fragment'), model_every,
    expected_elements, initial_model_version, update_payload_bytes,
    max_clusters."""

    def __init__(self, apply, *, model=None, **kwargs):
        convert = None if model is None else (lambda: as_f32(model()))
        super().__init__(apply, model=convert, **kwargs)

    def broadcast_model(self, params, cluster=None):
        return super().broadcast_model(as_f32(params), cluster)
