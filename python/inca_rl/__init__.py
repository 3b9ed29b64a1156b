"""LunarLander-v3 (Gymnasium semantics) in C++ on Box2D, for Python.

    import inca_rl
    env = inca_rl.make("LunarLander-v3", seed=1)
    obs, info = env.reset(seed=42)
    obs, reward, terminated, truncated, info = env.step(inca_rl.heuristic(obs))

Observations are float32 numpy arrays of 8 values, actions 0..3 (noop, left
engine, main engine, right engine). See docs/rl.md for the differences from
Gymnasium (no rendering, a different random stream).
"""
from ._inca_rl import LunarLander, heuristic, observation_size, action_count

__all__ = ["LunarLander", "heuristic", "make", "observation_size", "action_count"]


def make(name="LunarLander-v3", **kwargs):
    """Gymnasium-style constructor; only LunarLander-v3 exists here."""
    if name != "LunarLander-v3":
        raise ValueError(f"unknown environment {name!r}; inca_rl has 'LunarLander-v3'")
    return LunarLander(**kwargs)
