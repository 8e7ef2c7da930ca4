#define BOOST_TEST_MODULE sched
#include <boost/test/unit_test.hpp>
