// cais-cli: see src/cli/cais_cli.h.
//   cais-cli add-rule --group-id 0 --layer-id 5 --chunk-id 0 --input-ports 1,2,3,4
//            --output-ports 1,2,3,4 --op-type allreduce
//   cais-cli dump-rules
//   cais-cli show-stats --device 127.0.0.1
#include <iostream>

#include "cli/cais_cli.h"

int main(int argc, char** argv) {
  return inca::cli::RunCaisCli(argc, argv, std::cout, std::cerr);
}
