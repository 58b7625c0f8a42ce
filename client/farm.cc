#include "client/farm.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/read_file.h"
#include "client/farm_batch.h"

namespace kprof::client {

absl::StatusOr<std::unique_ptr<Farm>> Farm::Connect(const std::string& target,
                                                    const ClientOptions& options) {
  absl::StatusOr<std::vector<std::string>> addresses = ResolveTarget(target);
  if (!addresses.ok()) return addresses.status();
  std::vector<std::unique_ptr<Client>> clients;
  ClientOptions checked = options;
  checked.health_check = true;
  for (const std::string& address : *addresses) {
    absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(address, checked);
    if (!client.ok()) return client.status();
    clients.push_back(*std::move(client));
  }
  return std::unique_ptr<Farm>(new Farm(*std::move(addresses), std::move(clients)));
}

std::string Farm::AddModule(std::string bytes, const std::string& name, const std::string& format) {
  std::string id = ModuleId(bytes);
  modules_.emplace(id, Module{std::move(bytes), name, format});
  return id;
}

absl::StatusOr<std::string> Farm::AddModuleFile(const std::string& path,
                                                const std::string& format) {
  absl::StatusOr<std::string> bytes = base::ReadFile(path, "module file");
  if (!bytes.ok()) return bytes.status();
  return AddModule(*std::move(bytes), path.substr(path.rfind('/') + 1), format);
}

absl::Status Farm::MeasureBatch(const std::vector<kprof::v1::BatchJob>& jobs,
                                const std::function<void(const kprof::v1::BatchUpdate&)>& on_update,
                                size_t window, const std::function<void()>& on_pause) {
  return Batch(*this, jobs, on_update, window, on_pause).Run();
}

}  // namespace kprof::client
