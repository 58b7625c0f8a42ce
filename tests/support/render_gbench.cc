// The CLI's Google Benchmark rendering of one TimeEvaluateResponse (binary protobuf on standard
// input), benchmark NAME: what `kprof time --format gbench` prints for that answer. The Python
// client's tests hand it the answers they measured, to check theirs byte for byte.
#include <cstdio>
#include <iostream>
#include <iterator>
#include <string>

#include "client/cli/gbench_format.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: kprof_render_gbench NAME < RESPONSE.binpb\n");
    return 2;
  }
  const std::string bytes((std::istreambuf_iterator<char>(std::cin)),
                          std::istreambuf_iterator<char>());
  kprof::v1::TimeEvaluateResponse response;
  if (!response.ParseFromString(bytes)) {
    std::fprintf(stderr, "kprof_render_gbench: standard input is no TimeEvaluateResponse\n");
    return 1;
  }
  std::printf("%s\n", kprof::client::GbenchDocument(&response.environment(),
                                                    kprof::client::GbenchRuns(argv[1], response))
                          .dump(2)
                          .c_str());
  return 0;
}
