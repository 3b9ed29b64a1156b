// LunarLander: Gymnasium's LunarLander-v3 (discrete actions, no wind) on
// Box2D 2.4, written from the published description of lunar_lander.py.
//
//  LunarLander       the environment with Gymnasium's TimeLimit folded in:
//                    Reset(seed?) -> observation, Step(action) -> {observation,
//                    reward, terminated, truncated}. Deterministic: all
//                    randomness (terrain, initial push, engine dispersion)
//                    comes from one std::mt19937_64 reseeded by Reset(seed);
//                    the same seed and actions give the same episode,
//                    bit for bit, on the same build.
//  HeuristicAction   Gymnasium's hand-written landing controller
//                    (`heuristic(env, s)`), the reference policy of its tests.
//
// Differences from Gymnasium that do not change the lander's dynamics: no
// rendering and no exhaust particles (they collide only with the ground, so
// they never touch the lander's island), and the random streams are
// mt19937_64 rather than NumPy's PCG64, so a seed gives a different (but
// equally distributed) episode than in Python.
//
// Not thread-safe; one instance per thread.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

class b2World;
class b2Body;

namespace inca::rl {

// Constants of lunar_lander.py (lengths in pixels unless /kScale is applied).
inline constexpr int kLunarFps = 50;
inline constexpr double kLunarScale = 30.0;
inline constexpr double kMainEnginePower = 13.0;
inline constexpr double kSideEnginePower = 0.6;
inline constexpr double kInitialRandomForce = 1000.0;
inline constexpr double kViewportW = 600.0;
inline constexpr double kViewportH = 400.0;
inline constexpr double kSolvedReturn = 200.0;

inline constexpr int kLunarObservationSize = 8;
inline constexpr int kLunarActionCount = 4;

// [x, y, vx, vy, angle, angular velocity, leg1 contact, leg2 contact],
// normalised as Gymnasium does: x, y in half-viewport units with the
// helipad (plus leg height) at (0, 0); velocities scaled to the same units
// per frame; angle in radians (not wrapped); contacts 0 or 1.
using LunarObservation = std::array<float, kLunarObservationSize>;

// Gymnasium's observation_space bounds (the useful range is about -1..1).
inline constexpr LunarObservation kLunarObservationLow = {-1.5f,       -1.5f, -5.f, -5.f,
                                                          -3.1415927f, -5.f,  0.f,  0.f};
inline constexpr LunarObservation kLunarObservationHigh = {1.5f,       1.5f, 5.f, 5.f,
                                                           3.1415927f, 5.f,  1.f, 1.f};

enum class LunarAction : uint8_t {
  kNoop = 0,
  kFireLeft = 1,   // left orientation engine: turns counter-clockwise (angle grows)
  kFireMain = 2,   // main engine: pushes along the lander's up axis
  kFireRight = 3,  // right orientation engine: turns clockwise
};
std::string_view ToString(LunarAction a);

struct LunarStep {
  LunarObservation observation{};
  double reward = 0;
  bool terminated = false;  // crash, |x| >= 1, or at rest
  bool truncated = false;   // time limit reached (may coincide with terminated)
};

struct LunarLanderOptions {
  double gravity = -10.0;        // m/s^2, Gymnasium requires -12 < g < 0
  int max_episode_steps = 1000;  // TimeLimit of LunarLander-v3; 0 = none
  uint64_t seed = 0;             // used by the first Reset() without a seed

  absl::Status Validate() const;
};

class LunarLander {
 public:
  static absl::StatusOr<std::unique_ptr<LunarLander>> Create(const LunarLanderOptions& options);
  ~LunarLander();
  LunarLander(const LunarLander&) = delete;
  LunarLander& operator=(const LunarLander&) = delete;

  // Starts an episode: builds terrain and lander, applies the random initial
  // push and takes one no-op physics step, as Gymnasium's reset() does. With
  // a seed the random stream restarts from it; without, it continues.
  LunarObservation Reset(std::optional<uint64_t> seed = std::nullopt);

  // One frame (1/50 s). Precondition: Reset() was called. Stepping after
  // terminated/truncated keeps simulating, as the raw Gymnasium env does;
  // callers should Reset() instead.
  LunarStep Step(LunarAction action);

  int elapsed_steps() const { return elapsed_steps_; }
  const LunarObservation& observation() const { return observation_; }
  const LunarLanderOptions& options() const { return options_; }
  // World x of the helipad flags and the pad's height (metres).
  double helipad_x1() const { return helipad_x1_; }
  double helipad_x2() const { return helipad_x2_; }
  double helipad_y() const { return helipad_y_; }
  // Whether the lander's body (not a leg) has touched the ground this episode.
  bool game_over() const { return game_over_; }

 private:
  class ContactListener;
  explicit LunarLander(const LunarLanderOptions& options);

  // Physics for one frame; returns the observation and fuel cost terms.
  LunarObservation Simulate(LunarAction action, double* main_power, double* side_power);
  double Uniform(double lo, double hi);
  // Reset's world: the ground, the hull, the two legs (in this order, as
  // the random draws are).
  void BuildTerrain();
  void BuildHull(double initial_y);
  void BuildLegs(double initial_y);

  LunarLanderOptions options_;
  std::mt19937_64 rng_;
  std::unique_ptr<ContactListener> listener_;
  std::unique_ptr<b2World> world_;
  b2Body* lander_ = nullptr;
  std::array<b2Body*, 2> legs_{};
  std::array<bool, 2> leg_contact_{};
  bool game_over_ = false;
  double helipad_x1_ = 0, helipad_x2_ = 0, helipad_y_ = 0;
  std::optional<double> prev_shaping_;
  int elapsed_steps_ = 0;
  LunarObservation observation_{};
};

// Gymnasium's heuristic(env, s) for the discrete lander: steer the angle
// towards the pad, hover at a height proportional to |x|, and after leg
// contact only brake the fall. Mean return > 200 in Gymnasium's tests.
LunarAction HeuristicAction(const LunarObservation& s);

}  // namespace inca::rl
