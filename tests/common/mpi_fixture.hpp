// MPI for a whole Boost.Test module: initialised before the first test case and
// finalised after the last (under mpirun, or as a singleton without it).
//   #include "tests/common/mpi_fixture.hpp"
//   using braid::test::MpiFixture;             // the macro takes an unqualified name
//   BOOST_TEST_GLOBAL_FIXTURE(MpiFixture);
#pragma once

#include "comm/mpi.hpp"

namespace braid::test {

struct MpiFixture {
  MpiFixture() : runtime(nullptr, nullptr) {}
  comm::MpiRuntime runtime;
};

}  // namespace braid::test
