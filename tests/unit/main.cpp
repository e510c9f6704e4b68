// The Catch2 runner of the unit tests.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
