#include "kiln/core/storage.h"

#include "kiln/core/allocator.h"

namespace kiln {

StorageImpl::StorageImpl(size_t nbytes) : data_(cpu_allocate(nbytes)), nbytes_(nbytes) {}

StorageImpl::StorageImpl(void* data, size_t nbytes, std::function<void()> release)
    : data_(data), nbytes_(nbytes), release_(std::move(release)) {}

StorageImpl::~StorageImpl() {
  if (release_) {
    release_();
    return;
  }
  cpu_free(data_, nbytes_);
}

}  // namespace kiln
