"""inca_rl: the C++ LunarLander reached from Python, Gymnasium-style."""
import numpy as np
import pytest

import inca_rl  # built with the other modules into build/release/python


def run_episode(env, seed, policy):
    obs, info = env.reset(seed=seed)
    assert isinstance(info, dict)
    total = 0.0
    while True:
        obs, reward, terminated, truncated, _ = env.step(policy(obs))
        total += reward
        if terminated or truncated:
            return total


def test_reset_step_shapes_and_types():
    env = inca_rl.make("LunarLander-v3", seed=3)
    obs, info = env.reset(seed=7)
    assert obs.dtype == np.float32 and obs.shape == (8,)
    obs2, reward, terminated, truncated, info = env.step(0)
    assert obs2.shape == (8,) and isinstance(reward, float)
    assert isinstance(terminated, bool) and isinstance(truncated, bool)
    assert env.elapsed_steps == 1


def test_same_seed_same_episode():
    rng = np.random.default_rng(0)
    actions = rng.integers(0, 4, size=300)
    a, b = inca_rl.LunarLander(), inca_rl.LunarLander()
    oa, _ = a.reset(seed=11)
    ob, _ = b.reset(seed=11)
    assert np.array_equal(oa, ob)
    for act in actions:
        ra, rb = a.step(int(act)), b.step(int(act))
        assert np.array_equal(ra[0], rb[0]) and ra[1] == rb[1]
        if ra[2] or ra[3]:
            break


def test_heuristic_lands_and_random_crashes():
    env = inca_rl.LunarLander()
    heur = [run_episode(env, s, inca_rl.heuristic) for s in range(20)]
    rng = np.random.default_rng(1)
    rand = [run_episode(env, 100 + s, lambda _o: int(rng.integers(0, 4))) for s in range(20)]
    # Gymnasium: heuristic > 200 on average, random around -170..-200.
    assert np.mean(heur) > 150, heur
    assert -320 < np.mean(rand) < -60, rand


def test_bad_input_is_a_clear_error():
    env = inca_rl.LunarLander()
    with pytest.raises(ValueError, match="reset"):
        env.step(0)
    env.reset()
    with pytest.raises(ValueError, match="action must be"):
        env.step(7)
    with pytest.raises(ValueError, match="8 floats"):
        inca_rl.heuristic(np.zeros(3, dtype=np.float32))
    with pytest.raises(ValueError, match="unknown environment"):
        inca_rl.make("CartPole-v1")
