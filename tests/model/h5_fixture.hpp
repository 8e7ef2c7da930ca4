// Reading the committed HDF5 fixtures of the parity tests (written by h5py): datasets into
// vectors and fixed-length string attributes, of the file's root or of a group.
#pragma once

#include <boost/test/unit_test.hpp>

#include <hdf5.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace braid::test {

class H5File {
 public:
  explicit H5File(const std::string& path) : id_(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT)) {
    BOOST_REQUIRE_MESSAGE(id_ >= 0, "cannot open " << path);
  }
  ~H5File() { if (id_ >= 0) H5Fclose(id_); }
  H5File(const H5File&) = delete;
  H5File& operator=(const H5File&) = delete;

  template <typename T>
  std::vector<T> read(const std::string& name, hid_t mem_type) const {
    const hid_t ds = H5Dopen2(id_, name.c_str(), H5P_DEFAULT);
    BOOST_REQUIRE_MESSAGE(ds >= 0, "fixture has no dataset " << name);
    const hid_t space = H5Dget_space(ds);
    std::vector<T> out(std::size_t(H5Sget_simple_extent_npoints(space)));
    const herr_t rc = H5Dread(ds, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data());
    H5Sclose(space);
    H5Dclose(ds);
    BOOST_REQUIRE(rc >= 0);
    return out;
  }
  std::vector<float> floats(const std::string& n) const { return read<float>(n, H5T_NATIVE_FLOAT); }
  std::vector<double> doubles(const std::string& n) const { return read<double>(n, H5T_NATIVE_DOUBLE); }

  // A string attribute of the root ("/") or of a group.
  std::string string_attr(const std::string& name, const std::string& object = "/") const {
    const hid_t a = H5Aopen_by_name(id_, object.c_str(), name.c_str(), H5P_DEFAULT, H5P_DEFAULT);
    BOOST_REQUIRE_MESSAGE(a >= 0, "fixture has no attribute " << object << " " << name);
    const hid_t type = H5Aget_type(a);
    std::string s(H5Tget_size(type), '\0');
    H5Aread(a, type, s.data());
    H5Tclose(type);
    H5Aclose(a);
    return s.substr(0, s.find('\0'));
  }

 private:
  hid_t id_;
};

// max |a − b| / max |b|: relative to the array's scale, so that entries near zero do not
// dominate.
template <typename A>
double rel_error(const A* a, const std::vector<double>& ref) {
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    diff = std::max(diff, std::abs(double(a[i]) - ref[i]));
    scale = std::max(scale, std::abs(ref[i]));
  }
  return diff / scale;
}

}  // namespace braid::test
