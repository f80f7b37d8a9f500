// Dispatch modes: what a mode sees, per-(op, mode type) rules, nesting, the guard.
#include "opconform/core/dispatch_mode.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "opconform/core.h"

namespace opconform {
namespace {

// Records every call it handles, then lets it run (rules for LoggingMode first).
struct LoggingMode : DispatchMode {
  std::vector<std::string> seen;
  void dispatch(const OperatorHandle& op, Stack& stack) override {
    seen.push_back(op.name());
    DispatchMode::dispatch(op, stack);
  }
};

// No behaviour of its own: only the rules registered for it.
struct ZeroMode : DispatchMode {};

Tensor vec(std::vector<float> v) {
  int64_t n = static_cast<int64_t>(v.size());
  return from_vector<float>(v, {n});
}

class DispatchModeTest : public ::testing::Test {
 public:  // the modes defined in tests call the helpers
  void SetUp() override {
    lib.define("add1(Tensor a) -> Tensor");
    lib.define("twice_add1(Tensor a) -> Tensor");
    lib.impl("add1", [](const Tensor& a) {
      Tensor out = a.clone();
      float* p = out.mutable_data_ptr<float>();
      for (int64_t i = 0; i < out.numel(); ++i) p[i] += 1;
      return out;
    }, DispatchKey::CPU);
    // A kernel made of other operator calls.
    lib.impl("twice_add1", [this](const Tensor& a) { return add1(add1(a)); }, DispatchKey::CPU);
  }

  Tensor add1(const Tensor& a) { return registry.get("t::add1").typed<Tensor(const Tensor&)>().call(a); }
  Tensor twice_add1(const Tensor& a) {
    return registry.get("t::twice_add1").typed<Tensor(const Tensor&)>().call(a);
  }

  Registry registry;
  Library lib{"t", LibraryKind::DEF, std::nullopt, registry};
  RegistrationHandle fallback = install_dispatch_mode_fallback(registry);
};

TEST_F(DispatchModeTest, LoggingModeSeesTheCallsMadeUnderIt) {
  auto mode = std::make_shared<LoggingMode>();
  Tensor out;
  {
    DispatchModeGuard guard(mode);
    add1(vec({1}));
    out = twice_add1(vec({1}));
  }
  add1(vec({1}));  // after the guard: not seen
  // Note [What a mode sees]: the calls twice_add1's kernel makes are not seen (the mode is off
  // the stack while it handles a call), as PyTorch.
  EXPECT_EQ(mode->seen, (std::vector<std::string>{"t::add1", "t::twice_add1"}));
  EXPECT_EQ(out.to_vector<float>(), std::vector<float>{3});
}

TEST_F(DispatchModeTest, RuleReplacesTheOpOnlyUnderItsModeType) {
  auto zero_rule = register_dispatch_rule<ZeroMode>("t::add1", [](ZeroMode&, const OperatorHandle&, Stack& stack) {
    Tensor a = stack.back().to_tensor();
    stack.back() = IValue(zeros(a.sizes(), a.options()));
  });
  {
    DispatchModeGuard guard(std::make_shared<ZeroMode>());
    EXPECT_EQ(add1(vec({5})).to_vector<float>(), std::vector<float>{0});
  }
  {
    DispatchModeGuard guard(std::make_shared<LoggingMode>());  // another mode type: no rule
    EXPECT_EQ(add1(vec({5})).to_vector<float>(), std::vector<float>{6});
  }
  EXPECT_EQ(add1(vec({5})).to_vector<float>(), std::vector<float>{6});  // no mode
  zero_rule.reset();
  DispatchModeGuard guard(std::make_shared<ZeroMode>());
  EXPECT_EQ(add1(vec({5})).to_vector<float>(), std::vector<float>{6});  // rule gone
}

TEST_F(DispatchModeTest, RuleCanRunTheOpAsUsual) {
  // Doubles what add1 returns, under LoggingMode; the logging still happens (dispatch runs first).
  auto rule = register_dispatch_rule(
      "t::add1", std::type_index(typeid(LoggingMode)), [](DispatchMode& mode, const OperatorHandle& op, Stack& stack) {
        mode.redispatch(op, stack);
        Tensor r = stack.back().to_tensor();
        float* p = r.mutable_data_ptr<float>();
        for (int64_t i = 0; i < r.numel(); ++i) p[i] *= 2;
      });
  auto mode = std::make_shared<LoggingMode>();
  DispatchModeGuard guard(mode);
  EXPECT_EQ(add1(vec({1, 2})).to_vector<float>(), (std::vector<float>{4, 6}));
  EXPECT_EQ(mode->seen, std::vector<std::string>{"t::add1"});
}

TEST_F(DispatchModeTest, OuterModeSeesWhatTheInnerModeRuns) {
  // The inner mode runs an extra op for every call, then the call itself.
  struct ExtraCallMode : DispatchMode {
    DispatchModeTest* test;
    std::vector<std::string> seen;
    explicit ExtraCallMode(DispatchModeTest* t) : test(t) {}
    void dispatch(const OperatorHandle& op, Stack& stack) override {
      seen.push_back(op.name());
      test->add1(vec({0}));
      redispatch(op, stack);
    }
  };
  auto outer = std::make_shared<LoggingMode>();
  auto inner = std::make_shared<ExtraCallMode>(this);
  {
    DispatchModeGuard g1(outer);
    DispatchModeGuard g2(inner);
    EXPECT_EQ(dispatch_mode_stack().size(), 2u);
    twice_add1(vec({1}));
  }
  EXPECT_EQ(inner->seen, std::vector<std::string>{"t::twice_add1"});
  EXPECT_EQ(outer->seen, (std::vector<std::string>{"t::add1", "t::twice_add1"}));
}

TEST_F(DispatchModeTest, GuardRestoresStackAndKey) {
  EXPECT_TRUE(dispatch_mode_stack().empty());
  EXPECT_FALSE(local_dispatch_key_set().included.has(DispatchKey::DispatchMode));
  auto a = std::make_shared<LoggingMode>();
  auto b = std::make_shared<LoggingMode>();
  {
    DispatchModeGuard ga(a);
    {
      DispatchModeGuard gb(b);
      ASSERT_EQ(dispatch_mode_stack().size(), 2u);
      EXPECT_EQ(dispatch_mode_stack().back(), b);
      add1(vec({1}));
    }
    ASSERT_EQ(dispatch_mode_stack().size(), 1u);
    EXPECT_EQ(dispatch_mode_stack().back(), a);
    EXPECT_TRUE(local_dispatch_key_set().included.has(DispatchKey::DispatchMode));
    add1(vec({1}));
  }
  EXPECT_TRUE(dispatch_mode_stack().empty());
  EXPECT_FALSE(local_dispatch_key_set().included.has(DispatchKey::DispatchMode));
  // b saw one call; a saw b's redispatch of it and its own call.
  EXPECT_EQ(b->seen.size(), 1u);
  EXPECT_EQ(a->seen.size(), 2u);
}

TEST_F(DispatchModeTest, ModeIsPoppedWhileItHandlesACallAndRestoredOnErrors) {
  struct ThrowingMode : DispatchMode {
    size_t depth_inside = 99;
    void dispatch(const OperatorHandle&, Stack&) override {
      depth_inside = dispatch_mode_stack().size();
      throw Error(ErrorCode::kInvalidArgument, "refused");
    }
  };
  auto mode = std::make_shared<ThrowingMode>();
  DispatchModeGuard guard(mode);
  EXPECT_THROW(add1(vec({1})), Error);
  EXPECT_EQ(mode->depth_inside, 0u);
  EXPECT_EQ(dispatch_mode_stack().size(), 1u);
  EXPECT_TRUE(local_dispatch_key_set().included.has(DispatchKey::DispatchMode));
}

TEST_F(DispatchModeTest, RegistrationErrors) {
  EXPECT_THROW(register_dispatch_rule("add1", std::type_index(typeid(ZeroMode)),
                                      [](DispatchMode&, const OperatorHandle&, Stack&) {}),
               Error);
  EXPECT_THROW(register_dispatch_rule("t::add1", std::type_index(typeid(ZeroMode)), nullptr), Error);
  EXPECT_THROW(DispatchModeGuard(nullptr), Error);
}

// A tensor-subclass-like wrapper that logs the ops it sees and otherwise runs them unwrapped.
struct LoggingTensor : TensorSubclass {
  std::vector<std::string> seen;
  void dispatch(const OperatorHandle& op, Stack& stack) override {
    seen.push_back(op.name());
    TensorSubclass::dispatch(op, stack);
  }
};
struct PlusTenTensor : TensorSubclass {};

TEST_F(DispatchModeTest, WrapperTensorsRouteTheirCallsToTheirSubclass) {
  auto logging = std::make_shared<LoggingTensor>();
  Tensor x = vec({1, 2});
  Tensor wrapped = make_subclass_tensor(x, logging);
  EXPECT_EQ(subclass_of(wrapped), logging.get());
  EXPECT_EQ(subclass_of(x), nullptr);
  EXPECT_TRUE(unwrap_subclass(wrapped).is_same(x));
  Tensor y = add1(wrapped);  // unwrapped, run, results as they come
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{2, 3}));
  EXPECT_EQ(subclass_of(y), nullptr);
  EXPECT_EQ(logging->seen, std::vector<std::string>{"t::add1"});
  add1(x);  // a plain tensor does not reach the subclass
  EXPECT_EQ(logging->seen.size(), 1u);
}

TEST_F(DispatchModeTest, RulesForASubclassTypeReplaceTheOpForItsWrappersOnly) {
  auto rule = register_dispatch_rule<PlusTenTensor>("t::add1", [](PlusTenTensor&, const OperatorHandle&, Stack& stack) {
    Tensor a = unwrap_subclass(stack.back().to_tensor());
    Tensor out = a.clone();
    for (int64_t i = 0; i < out.numel(); ++i) out.set({i}, Scalar(out.get({i}).to_double() + 10));
    stack.back() = IValue(out);
  });
  Tensor x = vec({1});
  EXPECT_EQ(add1(make_subclass_tensor(x, std::make_shared<PlusTenTensor>())).item().to<float>(), 11.0f);
  EXPECT_EQ(add1(x).item().to<float>(), 2.0f);
  // A mode runs first and sees the wrapper; the subclass handles the call after it.
  auto logging = std::make_shared<LoggingMode>();
  {
    DispatchModeGuard guard(logging);
    EXPECT_EQ(add1(make_subclass_tensor(x, std::make_shared<PlusTenTensor>())).item().to<float>(), 11.0f);
  }
  EXPECT_EQ(logging->seen, std::vector<std::string>{"t::add1"});
}

}  // namespace
}  // namespace opconform
