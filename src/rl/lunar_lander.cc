// LunarLander-v3 on Box2D 2.4 (see include/inca/rl/lunar_lander.h).
//
// World units are metres: pixel constants are divided by kLunarScale. One
// Step() = one Box2D step of 1/50 s with 180 velocity and 60 position
// iterations, as in Gymnasium.
#include "inca/rl/lunar_lander.h"

#include <box2d/box2d.h>

#include <cmath>

#include "absl/strings/str_cat.h"

namespace inca::rl {
namespace {

constexpr double kLegAway = 20;
constexpr double kLegDown = 18;
constexpr double kLegW = 2;
constexpr double kLegH = 8;
constexpr double kLegSpringTorque = 40;
constexpr double kSideEngineHeight = 14.0;
constexpr double kSideEngineAway = 12.0;
constexpr int kTerrainChunks = 11;
// Lander hull, pixels, counter-clockwise from the top left.
constexpr std::array<std::array<double, 2>, 6> kLanderPoly = {
    {{-14, +17}, {-17, 0}, {-17, -10}, {+17, -10}, {+17, 0}, {+14, +17}}};

constexpr uint16_t kGroundCategory = 0x0001;
constexpr uint16_t kLanderCategory = 0x0010;
constexpr uint16_t kLegCategory = 0x0020;

constexpr double kW = kViewportW / kLunarScale;  // world width, m
constexpr double kH = kViewportH / kLunarScale;  // world height, m

b2Vec2 V(double x, double y) {
  return b2Vec2(static_cast<float>(x), static_cast<float>(y));
}

}  // namespace

// Box2D calls BeginContact/EndContact from inside b2World::Step; the lander
// touching anything is a crash, a leg touching the ground is a contact.
class LunarLander::ContactListener final : public b2ContactListener {
 public:
  explicit ContactListener(LunarLander* env) : env_(env) {}

  void BeginContact(b2Contact* contact) override {
    const b2Body* a = contact->GetFixtureA()->GetBody();
    const b2Body* b = contact->GetFixtureB()->GetBody();
    if (a == env_->lander_ || b == env_->lander_) env_->game_over_ = true;
    for (int i = 0; i < 2; ++i) {
      if (a == env_->legs_[i] || b == env_->legs_[i]) env_->leg_contact_[i] = true;
    }
  }

  void EndContact(b2Contact* contact) override {
    const b2Body* a = contact->GetFixtureA()->GetBody();
    const b2Body* b = contact->GetFixtureB()->GetBody();
    for (int i = 0; i < 2; ++i) {
      if (a == env_->legs_[i] || b == env_->legs_[i]) env_->leg_contact_[i] = false;
    }
  }

 private:
  LunarLander* env_;
};

std::string_view ToString(LunarAction a) {
  switch (a) {
    case LunarAction::kNoop: return "noop";
    case LunarAction::kFireLeft: return "fire_left";
    case LunarAction::kFireMain: return "fire_main";
    case LunarAction::kFireRight: return "fire_right";
  }
  return "unknown";
}

absl::Status LunarLanderOptions::Validate() const {
  if (!(gravity > -12.0 && gravity < 0.0)) {
    return absl::InvalidArgumentError(absl::StrCat("gravity must be in (-12, 0), got ", gravity));
  }
  if (max_episode_steps < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_episode_steps must be >= 0, got ", max_episode_steps));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<LunarLander>> LunarLander::Create(
    const LunarLanderOptions& options) {
  if (absl::Status s = options.Validate(); !s.ok()) return s;
  return std::unique_ptr<LunarLander>(new LunarLander(options));
}

LunarLander::LunarLander(const LunarLanderOptions& options)
    : options_(options), rng_(options.seed), listener_(std::make_unique<ContactListener>(this)) {}

LunarLander::~LunarLander() = default;

double LunarLander::Uniform(double lo, double hi) {
  // 53 random bits -> [0, 1): the same on every platform, unlike
  // std::uniform_real_distribution.
  const double u = static_cast<double>(rng_() >> 11) * 0x1.0p-53;
  return lo + (hi - lo) * u;
}

// Terrain: 11 chunks, random heights smoothed over 3 neighbours (index -1
// wraps to the last height, as NumPy indexing does), flat around the pad.
void LunarLander::BuildTerrain() {
  std::array<double, kTerrainChunks + 1> height;
  for (double& h : height) h = Uniform(0, kH / 2);
  std::array<double, kTerrainChunks> chunk_x;
  for (int i = 0; i < kTerrainChunks; ++i) chunk_x[i] = kW / (kTerrainChunks - 1) * i;
  constexpr int kMid = kTerrainChunks / 2;
  helipad_x1_ = chunk_x[kMid - 1];
  helipad_x2_ = chunk_x[kMid + 1];
  helipad_y_ = kH / 4;
  for (int i = kMid - 2; i <= kMid + 2; ++i) height[i] = helipad_y_;
  std::array<double, kTerrainChunks> smooth_y;
  for (int i = 0; i < kTerrainChunks; ++i) {
    const double prev = height[(i + kTerrainChunks) % (kTerrainChunks + 1)];
    smooth_y[i] = 0.33 * (prev + height[i] + height[i + 1]);
  }

  b2BodyDef moon_def;  // static
  b2Body* moon = world_->CreateBody(&moon_def);
  {
    b2EdgeShape floor;
    floor.SetTwoSided(V(0, 0), V(kW, 0));
    b2FixtureDef fd;  // pybox2d's shapes= defaults: friction 0.2, density 0
    fd.shape = &floor;
    fd.friction = 0.2f;
    moon->CreateFixture(&fd);
  }
  for (int i = 0; i < kTerrainChunks - 1; ++i) {
    b2EdgeShape edge;
    edge.SetTwoSided(V(chunk_x[i], smooth_y[i]), V(chunk_x[i + 1], smooth_y[i + 1]));
    b2FixtureDef fd;
    fd.shape = &edge;
    fd.density = 0;
    fd.friction = 0.1f;
    moon->CreateFixture(&fd);
  }
}

// The hull at (kW / 2, initial_y): collides only with the ground.
void LunarLander::BuildHull(double initial_y) {
  {
    b2BodyDef bd;
    bd.type = b2_dynamicBody;
    bd.position = V(kW / 2, initial_y);
    bd.angle = 0;
    lander_ = world_->CreateBody(&bd);
    std::array<b2Vec2, kLanderPoly.size()> verts;
    for (size_t i = 0; i < kLanderPoly.size(); ++i) {
      verts[i] = V(kLanderPoly[i][0] / kLunarScale, kLanderPoly[i][1] / kLunarScale);
    }
    b2PolygonShape hull;
    hull.Set(verts.data(), static_cast<int32>(verts.size()));
    b2FixtureDef fd;
    fd.shape = &hull;
    fd.density = 5.0f;
    fd.friction = 0.1f;
    fd.restitution = 0.0f;
    fd.filter.categoryBits = kLanderCategory;
    fd.filter.maskBits = kGroundCategory;
    lander_->CreateFixture(&fd);
  }
}

// Legs: i = -1 (legs_[0], the left one) and +1, on spring-loaded joints.
void LunarLander::BuildLegs(double initial_y) {
  for (int k = 0; k < 2; ++k) {
    const double i = k == 0 ? -1.0 : 1.0;
    b2BodyDef bd;
    bd.type = b2_dynamicBody;
    bd.position = V(kW / 2 - i * kLegAway / kLunarScale, initial_y);
    bd.angle = static_cast<float>(i * 0.05);
    b2Body* leg = world_->CreateBody(&bd);
    b2PolygonShape box;
    box.SetAsBox(static_cast<float>(kLegW / kLunarScale), static_cast<float>(kLegH / kLunarScale));
    b2FixtureDef fd;
    fd.shape = &box;
    fd.density = 1.0f;
    fd.restitution = 0.0f;
    fd.filter.categoryBits = kLegCategory;
    fd.filter.maskBits = kGroundCategory;
    leg->CreateFixture(&fd);

    b2RevoluteJointDef rjd;
    rjd.bodyA = lander_;
    rjd.bodyB = leg;
    rjd.localAnchorA = V(0, 0);
    rjd.localAnchorB = V(i * kLegAway / kLunarScale, kLegDown / kLunarScale);
    rjd.enableMotor = true;
    rjd.enableLimit = true;
    rjd.maxMotorTorque = static_cast<float>(kLegSpringTorque);
    rjd.motorSpeed = static_cast<float>(0.3 * i);  // low enough not to jump back up
    if (k == 0) {
      rjd.lowerAngle = 0.9f - 0.5f;
      rjd.upperAngle = 0.9f;
    } else {
      rjd.lowerAngle = -0.9f;
      rjd.upperAngle = -0.9f + 0.5f;
    }
    world_->CreateJoint(&rjd);
    legs_[k] = leg;
  }
}

LunarObservation LunarLander::Reset(std::optional<uint64_t> seed) {
  if (seed.has_value()) rng_.seed(*seed);
  // A fresh world per episode: no state (contacts, warm starts) leaks across.
  world_ = std::make_unique<b2World>(V(0, options_.gravity));
  world_->SetContactListener(listener_.get());
  game_over_ = false;
  leg_contact_ = {false, false};
  prev_shaping_.reset();
  elapsed_steps_ = 0;

  BuildTerrain();
  // Lander hull at the top centre, collides only with the ground.
  const double initial_y = kViewportH / kLunarScale;
  BuildHull(initial_y);
  const double fx = Uniform(-kInitialRandomForce, kInitialRandomForce);
  const double fy = Uniform(-kInitialRandomForce, kInitialRandomForce);
  lander_->ApplyForceToCenter(V(fx, fy), true);

  BuildLegs(initial_y);

  // Gymnasium's reset() returns the observation after one no-op step; that
  // step's reward is discarded but it sets the shaping baseline.
  double main_power = 0, side_power = 0;
  observation_ = Simulate(LunarAction::kNoop, &main_power, &side_power);
  const auto& s = observation_;
  prev_shaping_ = -100 * std::sqrt(double{s[0]} * s[0] + double{s[1]} * s[1]) -
                  100 * std::sqrt(double{s[2]} * s[2] + double{s[3]} * s[3]) -
                  100 * std::abs(double{s[4]}) + 10 * double{s[6]} + 10 * double{s[7]};
  return observation_;
}

LunarObservation LunarLander::Simulate(LunarAction action, double* main_power, double* side_power) {
  const b2Vec2 pos0 = lander_->GetPosition();
  const double angle0 = lander_->GetAngle();
  const double tip_x = std::sin(angle0), tip_y = std::cos(angle0);
  const double side_x = -tip_y, side_y = tip_x;
  // Two dispersion draws every frame, whether or not an engine fires.
  const double d0 = Uniform(-1.0, 1.0) / kLunarScale;
  const double d1 = Uniform(-1.0, 1.0) / kLunarScale;

  *main_power = 0;
  if (action == LunarAction::kFireMain) {
    *main_power = 1.0;
    // Nozzle 4 px below the centre, +-2 px of randomness along and across.
    const double ox = tip_x * (4 / kLunarScale + 2 * d0) + side_x * d1;
    const double oy = -tip_y * (4 / kLunarScale + 2 * d0) - side_y * d1;
    const double p = kMainEnginePower * *main_power;
    lander_->ApplyLinearImpulse(V(-ox * p, -oy * p), V(pos0.x + ox, pos0.y + oy), true);
  }

  *side_power = 0;
  if (action == LunarAction::kFireLeft || action == LunarAction::kFireRight) {
    *side_power = 1.0;
    const double direction = static_cast<double>(static_cast<int>(action) - 2);  // -1 or +1
    const double ox = tip_x * d0 + side_x * (3 * d1 + direction * kSideEngineAway / kLunarScale);
    const double oy = -tip_y * d0 - side_y * (3 * d1 + direction * kSideEngineAway / kLunarScale);
    const double px = pos0.x + ox - tip_x * 17 / kLunarScale;
    const double py = pos0.y + oy + tip_y * kSideEngineHeight / kLunarScale;
    const double p = kSideEnginePower * *side_power;
    lander_->ApplyLinearImpulse(V(-ox * p, -oy * p), V(px, py), true);
  }

  world_->Step(1.0f / kLunarFps, 6 * 30, 2 * 30);

  const b2Vec2 pos = lander_->GetPosition();
  const b2Vec2 vel = lander_->GetLinearVelocity();
  const double half_w = kViewportW / kLunarScale / 2;
  const double half_h = kViewportH / kLunarScale / 2;
  return LunarObservation{
      static_cast<float>((pos.x - half_w) / half_w),
      static_cast<float>((pos.y - (helipad_y_ + kLegDown / kLunarScale)) / half_h),
      static_cast<float>(vel.x * half_w / kLunarFps),
      static_cast<float>(vel.y * half_h / kLunarFps),
      lander_->GetAngle(),
      static_cast<float>(20.0 * lander_->GetAngularVelocity() / kLunarFps),
      leg_contact_[0] ? 1.0f : 0.0f,
      leg_contact_[1] ? 1.0f : 0.0f,
  };
}

LunarStep LunarLander::Step(LunarAction action) {
  LunarStep out;
  double main_power = 0, side_power = 0;
  out.observation = Simulate(action, &main_power, &side_power);
  observation_ = out.observation;
  ++elapsed_steps_;

  // Potential-based shaping: distance to the pad, speed, tilt, leg contacts.
  const auto& s = out.observation;
  const double shaping = -100 * std::sqrt(double{s[0]} * s[0] + double{s[1]} * s[1]) -
                         100 * std::sqrt(double{s[2]} * s[2] + double{s[3]} * s[3]) -
                         100 * std::abs(double{s[4]}) + 10 * double{s[6]} + 10 * double{s[7]};
  double reward = prev_shaping_.has_value() ? shaping - *prev_shaping_ : 0.0;
  prev_shaping_ = shaping;
  reward -= main_power * 0.30;  // fuel: about -30 for a heuristic landing
  reward -= side_power * 0.03;

  if (game_over_ || std::abs(double{s[0]}) >= 1.0) {
    out.terminated = true;
    reward = -100;
  }
  if (!lander_->IsAwake()) {  // at rest: Box2D put the island to sleep
    out.terminated = true;
    reward = +100;
  }
  out.reward = reward;
  out.truncated = options_.max_episode_steps > 0 && elapsed_steps_ >= options_.max_episode_steps;
  return out;
}

LunarAction HeuristicAction(const LunarObservation& s) {
  double angle_targ = s[0] * 0.5 + s[2] * 1.0;  // point towards the centre
  if (angle_targ > 0.4) angle_targ = 0.4;       // more than 22 degrees is bad
  if (angle_targ < -0.4) angle_targ = -0.4;
  const double hover_targ = 0.55 * std::abs(double{s[0]});  // higher when far off

  double angle_todo = (angle_targ - s[4]) * 0.5 - s[5] * 1.0;
  double hover_todo = (hover_targ - s[1]) * 0.5 - s[3] * 0.5;
  if (s[6] != 0 || s[7] != 0) {  // legs down: only brake the fall
    angle_todo = 0;
    hover_todo = -s[3] * 0.5;
  }
  if (hover_todo > std::abs(angle_todo) && hover_todo > 0.05) return LunarAction::kFireMain;
  if (angle_todo < -0.05) return LunarAction::kFireRight;
  if (angle_todo > +0.05) return LunarAction::kFireLeft;
  return LunarAction::kNoop;
}

}  // namespace inca::rl
