#include <string>

namespace uploads {

class Uploader {
 public:
  int RetryUpload(const std::string& part);
  void Abort() { queue_.clear(); /* drop every queued part now */ }

 private:
  int attempts_ = 3;
};

// Sends the part again, three times at most.
int Uploader::RetryUpload(const std::string& part) {
  return Send(part, attempts_, /*backoff=*/true);
}

}  // namespace uploads
