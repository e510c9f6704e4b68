// The one translation unit that compiles Asio (with its SSL part) and Beast.
// Every other file includes their headers with BOOST_ASIO_SEPARATE_COMPILATION and
// BOOST_BEAST_SEPARATE_COMPILATION set, so the heavy implementation is built once.
#include <boost/asio/impl/src.hpp>
#include <boost/asio/ssl/impl/src.hpp>
#include <boost/beast/src.hpp>
