// HeldBytes: leases add bytes once and take them back once.
#include <catch2/catch.hpp>

#include <utility>

#include "trainer/parallel/held_bytes.h"

namespace ct = ctrun::trainer;

TEST_CASE("a lease adds its bytes and gives them back on release") {
  ct::HeldBytes held;
  ct::HeldBytes::Lease lease = held.Hold(100);
  CHECK(lease.held());
  CHECK(held.current() == 100);
  lease.Release();
  CHECK_FALSE(lease.held());
  CHECK(held.current() == 0);
  lease.Release();  // a second release gives back nothing
  CHECK(held.current() == 0);
  CHECK(held.peak() == 100);
}

TEST_CASE("a lease gives its bytes back when destroyed") {
  ct::HeldBytes held;
  { ct::HeldBytes::Lease lease = held.Hold(7); }
  CHECK(held.current() == 0);
}

TEST_CASE("moving a lease moves the bytes, not a copy of them") {
  ct::HeldBytes held;
  ct::HeldBytes::Lease a = held.Hold(10);
  ct::HeldBytes::Lease b = std::move(a);
  CHECK_FALSE(a.held());
  CHECK(held.current() == 10);
  ct::HeldBytes::Lease c = held.Hold(5);
  c = std::move(b);  // c's 5 go back, b's 10 stay held by c
  CHECK(held.current() == 10);
  c.Release();
  CHECK(held.current() == 0);
}

TEST_CASE("the peak is the most held at once since ResetPeak") {
  ct::HeldBytes held;
  ct::HeldBytes::Lease a = held.Hold(30);
  {
    ct::HeldBytes::Lease b = held.Hold(20);
    CHECK(held.peak() == 50);
  }
  CHECK(held.peak() == 50);
  held.ResetPeak();
  CHECK(held.peak() == 30);
  ct::HeldBytes::Lease c = held.Hold(0);
  CHECK(held.peak() == 30);
}

TEST_CASE("HeldBytes with a total: the total's peak is the most held at once over its parts") {
  ct::HeldBytes total;
  ct::HeldBytes a(&total), b(&total);
  {
    ct::HeldBytes::Lease x = a.Hold(100);
    ct::HeldBytes::Lease y = b.Hold(30);
    CHECK(total.current() == 130);
  }
  ct::HeldBytes::Lease z = b.Hold(60);  // a's 100 is gone: parts peak 100 + 60, together 130
  CHECK(a.peak() + b.peak() == 160);
  CHECK(total.peak() == 130);
  z.Release();
  CHECK(total.current() == 0);
  total.ResetPeak();
  CHECK(total.peak() == 0);
}
