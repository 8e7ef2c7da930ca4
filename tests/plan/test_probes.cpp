// The device probes of braid-profile measure, run on the CPU backend (a GPU takes the
// same code): the product through the backend's gemm is checked entry by hand inside the
// probe (it throws on a wrong product), with f32 weights and, where the backend takes
// them, bf16; and the hardware block made from it names the device.
#define BOOST_TEST_MODULE plan_probes
#include <boost/test/unit_test.hpp>

#include "backend/registry.hpp"
#include "plan/probes.hpp"

using namespace braid;

BOOST_AUTO_TEST_CASE(the_backend_probe_multiplies_and_copies_on_the_device) {
  auto be = backend::make_backend("cpu", 1);
  for (const backend::DType t : {backend::DType::f32, backend::DType::bf16}) {
    if (t == backend::DType::bf16 && !be->supports(backend::Op::gemm, t)) continue;
    const plan::ProbeResult r = plan::probe_backend(*be, t, 96, 1 << 20, 2);
    BOOST_TEST(r.gemm_flops > 0);
    BOOST_TEST(r.mem_bandwidth > 0);
    BOOST_TEST(r.threads == be->threads());
    const plan::Hardware hw = plan::device_hardware(r, be->name(), 8e9, int(backend::dtype_size(t)));
    BOOST_TEST(hw.name == be->name());
    BOOST_TEST(hw.peak_flops == r.gemm_flops);
    BOOST_TEST(hw.mem_bandwidth == r.mem_bandwidth);
    BOOST_TEST(hw.mem_capacity == 8e9);
    BOOST_TEST(hw.dtype_bytes == int(backend::dtype_size(t)));
  }
}
