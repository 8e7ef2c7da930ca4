// Device specs and make_backend(): what parses, what each failure says.
#define BOOST_TEST_MODULE backend_registry
#include <boost/test/unit_test.hpp>

#include "backend/registry.hpp"
#include "core/error.hpp"

#include <string>

namespace be = braid::backend;

BOOST_AUTO_TEST_CASE(device_specs_parse) {
  const auto cpu = be::parse_device("cpu");
  BOOST_TEST_REQUIRE(cpu.has_value());
  BOOST_TEST((cpu->kind == be::DeviceKind::cpu));
  const auto cuda = be::parse_device("cuda");
  BOOST_TEST_REQUIRE(cuda.has_value());
  BOOST_TEST((cuda->kind == be::DeviceKind::cuda));
  BOOST_TEST(cuda->device == 0);
  const auto cuda3 = be::parse_device("cuda:3");
  BOOST_TEST_REQUIRE(cuda3.has_value());
  BOOST_TEST(cuda3->device == 3);
  BOOST_TEST(cuda3->to_string() == "cuda:3");
  BOOST_TEST(be::parse_device(cuda3->to_string())->device == 3);
}

BOOST_AUTO_TEST_CASE(bad_specs_say_why) {
  for (const char* s : {"gpu", "CPU", "", "cuda0", "cpu:0"}) {
    std::string problem;
    BOOST_TEST_CONTEXT(s) {
      BOOST_TEST(!be::parse_device(s, &problem).has_value());
      BOOST_TEST(problem.find("is not a device (cpu or cuda[:N])") != std::string::npos, problem);
    }
  }
  for (const char* s : {"cuda:", "cuda:-1", "cuda:1x", "cuda:x"}) {
    std::string problem;
    BOOST_TEST_CONTEXT(s) {
      BOOST_TEST(!be::parse_device(s, &problem).has_value());
      BOOST_TEST(problem.find("must be a number >= 0") != std::string::npos, problem);
    }
  }
  try {
    be::parse_device_option("tpu");
    BOOST_FAIL("tpu parsed");
  } catch (const braid::UsageError& e) {
    BOOST_TEST(std::string(e.what()).find("--device: 'tpu'") == 0u, e.what());
  }
}

BOOST_AUTO_TEST_CASE(make_backend_gives_the_cpu_and_explains_cuda) {
  const auto cpu = be::make_backend("cpu", 1);
  BOOST_TEST(cpu->name() == "cpu");
  BOOST_TEST(cpu->threads() == 1);
  // Without CUDA or a GPU, cuda fails, saying the reason that holds; with them, cuda:0 is
  // the CUDA backend and an index past the devices present fails naming their count.
  const std::string why = be::cuda_unavailable_reason();
  if (!be::built_with_cuda()) BOOST_TEST(why.find("built without CUDA") != std::string::npos, why);
  if (why.empty()) {
    const auto gpu = be::make_backend("cuda:0", 1);
    BOOST_TEST(gpu->name() == "cuda:0");
    BOOST_TEST(!gpu->host_accessible());
    BOOST_TEST(gpu->supports(be::Op::attention, be::DType::f32));
    BOOST_TEST(!gpu->supports(be::Op::attention, be::DType::f64));
  }
  try {
    be::make_backend("cuda:99", 1);
    BOOST_FAIL("a CUDA backend was made for device 99");
  } catch (const braid::UsageError& e) {
    const std::string msg = e.what();
    BOOST_TEST(msg.find("--device cuda:99: ") == 0u, msg);
    if (!why.empty()) {
      BOOST_TEST(msg.find(why) != std::string::npos, msg);
    } else {
      BOOST_TEST(msg.find("CUDA device(s)") != std::string::npos, msg);
    }
  }
}
