#include "core/modules/elf_inspector.h"

#include <elf.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"

namespace kprof::core {
namespace {

// The host's machine: the one this very program was built for, read from its own ELF header,
// so any architecture kprofd is built on accepts its own modules. Only 64-bit hosts build
// kprofd (the module ABI's DLTensor layout is the 64-bit one).
uint16_t HostMachine() {
  static const uint16_t machine = [] {
    Elf64_Ehdr self{};
    std::ifstream in("/proc/self/exe", std::ios::binary);
    if (in.read(reinterpret_cast<char*>(&self), sizeof self) &&
        std::memcmp(self.e_ident, ELFMAG, SELFMAG) == 0) {
      return self.e_machine;
    }
#if defined(__x86_64__)
    return static_cast<uint16_t>(EM_X86_64);
#elif defined(__aarch64__)
    return static_cast<uint16_t>(EM_AARCH64);
#elif defined(__riscv)
    return static_cast<uint16_t>(EM_RISCV);
#elif defined(__powerpc64__)
    return static_cast<uint16_t>(EM_PPC64);
#else
    return static_cast<uint16_t>(EM_NONE);
#endif
  }();
  return machine;
}

// The host's own ELF class and byte order: modules must match them.
constexpr unsigned char kHostClass = ELFCLASS64;
constexpr unsigned char kHostData =
    __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? ELFDATA2LSB : ELFDATA2MSB;

std::string MachineName(uint16_t machine) {
  switch (machine) {
    case EM_X86_64:
      return "x86-64";
    case EM_AARCH64:
      return "aarch64";
    case EM_386:
      return "x86 (32-bit)";
    case EM_ARM:
      return "arm (32-bit)";
    case EM_RISCV:
      return "riscv";
    case EM_PPC64:
      return "ppc64";
    case EM_S390:
      return "s390";
    case EM_CUDA:
      return "cuda";
    default:
      return absl::StrCat("machine ", machine);
  }
}

absl::Status Invalid(std::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("invalid shared-library module: ", std::string(what)));
}

// A bounds-checked view of the file: every read names what it reads, for the error message.
class Bytes {
 public:
  explicit Bytes(std::string_view bytes) : bytes_(bytes) {}

  bool Contains(uint64_t offset, uint64_t size) const {
    return offset <= bytes_.size() && size <= bytes_.size() - offset;
  }

  template <typename T>
  absl::StatusOr<T> Read(uint64_t offset, std::string_view what) const {
    if (!Contains(offset, sizeof(T))) {
      return Invalid(absl::StrCat("truncated: ", std::string(what), " at offset ", offset,
                                  " lies past the end of the ", bytes_.size(), "-byte file"));
    }
    T value;
    std::memcpy(&value, bytes_.data() + offset, sizeof(T));
    return value;
  }

  // The NUL-terminated string at `offset` within the table [table, table + table_size).
  absl::StatusOr<std::string_view> String(uint64_t table, uint64_t table_size,
                                          uint64_t offset) const {
    if (offset >= table_size) {
      return Invalid(absl::StrCat("malformed: symbol name offset ", offset,
                                  " is outside its string table of ", table_size, " bytes"));
    }
    const std::string_view rest = bytes_.substr(table + offset, table_size - offset);
    const size_t end = rest.find('\0');
    if (end == std::string_view::npos) {
      return Invalid("malformed: a symbol name runs past the end of its string table");
    }
    return rest.substr(0, end);
  }

  size_t size() const { return bytes_.size(); }

 private:
  std::string_view bytes_;
};

#define KPROF_READ(lhs, bytes, type, offset, what)      \
  auto lhs##_or = (bytes).Read<type>((offset), (what)); \
  if (!lhs##_or.ok()) return lhs##_or.status();         \
  const type lhs = *lhs##_or

absl::Status CheckIdent(std::string_view raw) {
  if (raw.size() < SELFMAG || std::memcmp(raw.data(), ELFMAG, SELFMAG) != 0) {
    return Invalid(raw.empty() ? "the module is empty" : "not an ELF file (no \\x7fELF magic)");
  }
  if (raw.size() < EI_NIDENT) {
    return Invalid(absl::StrCat("truncated: ", raw.size(), " bytes, shorter than an ELF header"));
  }
  if (static_cast<unsigned char>(raw[EI_CLASS]) != kHostClass) {
    return Invalid(static_cast<unsigned char>(raw[EI_CLASS]) == ELFCLASS32
                       ? "a 32-bit ELF, this host is 64-bit"
                       : "an ELF of unknown class");
  }
  if (static_cast<unsigned char>(raw[EI_DATA]) != kHostData) {
    return Invalid("an ELF of the other byte order than this host's");
  }
  return absl::OkStatus();
}

// glibc refuses to dlopen a position-independent executable; so do we, with a clearer reason.
absl::StatusOr<bool> IsPositionIndependentExecutable(const Bytes& bytes, const Elf64_Ehdr& header) {
  for (uint16_t i = 0; i < header.e_phnum; ++i) {
    KPROF_READ(phdr, bytes, Elf64_Phdr, header.e_phoff + uint64_t{i} * sizeof(Elf64_Phdr),
               "a program header");
    if (phdr.p_type != PT_DYNAMIC) continue;
    if (!bytes.Contains(phdr.p_offset, phdr.p_filesz)) {
      return Invalid("truncated: the dynamic segment lies past the end of the file");
    }
    for (uint64_t off = 0; off + sizeof(Elf64_Dyn) <= phdr.p_filesz; off += sizeof(Elf64_Dyn)) {
      KPROF_READ(dyn, bytes, Elf64_Dyn, phdr.p_offset + off, "a dynamic entry");
      if (dyn.d_tag == DT_NULL) break;
      if (dyn.d_tag == DT_FLAGS_1 && (dyn.d_un.d_val & DF_1_PIE) != 0) return true;
    }
  }
  return false;
}

// The header of the string table `section` links to, checked: the table must exist and lie
// within the file. `table` names `section` in errors.
absl::StatusOr<Elf64_Shdr> LinkedStrings(const Bytes& bytes, const Elf64_Ehdr& header,
                                         const Elf64_Shdr& section, const char* table) {
  if (section.sh_link >= header.e_shnum) {
    return Invalid(absl::StrCat("malformed: the ", table, " links to no string table"));
  }
  const uint64_t at = header.e_shoff + uint64_t{section.sh_link} * sizeof(Elf64_Shdr);
  auto strings = bytes.Read<Elf64_Shdr>(at, "a string table's header");
  if (!strings.ok()) return strings.status();
  if (!bytes.Contains(strings->sh_offset, strings->sh_size)) {
    return Invalid("truncated: a string table lies past the end of the file");
  }
  return *strings;
}

// The names of the symbols `keep` accepts in the sections of `type` (SHT_DYNSYM, SHT_SYMTAB),
// and whether there was such a section at all.
template <typename Keep>
absl::StatusOr<std::pair<bool, std::vector<std::string>>> Symbols(const Bytes& bytes,
                                                                  const Elf64_Ehdr& header,
                                                                  uint32_t type, Keep keep) {
  // Crafted files could name millions of symbols, or one long name a million times: names are
  // kept once each, up to limits no real module comes near.
  constexpr size_t kMaxNames = 100'000;
  constexpr size_t kMaxNameLength = 4096;
  const char* table = type == SHT_DYNSYM ? "dynamic symbol table" : "symbol table";
  bool present = false;
  std::set<std::string, std::less<>> names;
  for (uint16_t i = 0; i < header.e_shnum; ++i) {
    KPROF_READ(section, bytes, Elf64_Shdr, header.e_shoff + uint64_t{i} * sizeof(Elf64_Shdr),
               "a section header");
    if (section.sh_type != type) continue;
    if (present) return Invalid(absl::StrCat("malformed: more than one ", table));
    present = true;
    if (section.sh_entsize != sizeof(Elf64_Sym)) {
      return Invalid(absl::StrCat("malformed: the ", table, "'s entries have an unexpected size"));
    }
    if (!bytes.Contains(section.sh_offset, section.sh_size)) {
      return Invalid(absl::StrCat("truncated: the ", table, " lies past the end of the file"));
    }
    absl::StatusOr<Elf64_Shdr> linked = LinkedStrings(bytes, header, section, table);
    if (!linked.ok()) return linked.status();
    const Elf64_Shdr& strings = *linked;
    for (uint64_t off = 0; off + sizeof(Elf64_Sym) <= section.sh_size; off += sizeof(Elf64_Sym)) {
      KPROF_READ(symbol, bytes, Elf64_Sym, section.sh_offset + off, "a symbol");
      if (!keep(symbol)) continue;
      auto name = bytes.String(strings.sh_offset, strings.sh_size, symbol.st_name);
      if (!name.ok()) return name.status();
      if (name->size() > kMaxNameLength) {
        return Invalid(absl::StrCat("a function name of ", name->size(), " bytes (limit ",
                                    kMaxNameLength, ")"));
      }
      if (name->empty() || names.find(*name) != names.end()) continue;
      if (names.size() == kMaxNames) {
        return Invalid(absl::StrCat("more than ", kMaxNames, " functions"));
      }
      names.emplace(*name);
    }
  }
  return std::pair{present, std::vector<std::string>(names.begin(), names.end())};
}

// DT_SONAME and DT_NEEDED, from the dynamic section and the string table it links to.
absl::Status ReadDependencies(const Bytes& bytes, const Elf64_Ehdr& header,
                              SharedLibraryInfo& info) {
  constexpr size_t kMaxNeeded = 1024;
  for (uint16_t i = 0; i < header.e_shnum; ++i) {
    KPROF_READ(section, bytes, Elf64_Shdr, header.e_shoff + uint64_t{i} * sizeof(Elf64_Shdr),
               "a section header");
    if (section.sh_type != SHT_DYNAMIC) continue;
    if (!bytes.Contains(section.sh_offset, section.sh_size)) {
      return Invalid("truncated: the dynamic section lies past the end of the file");
    }
    absl::StatusOr<Elf64_Shdr> linked = LinkedStrings(bytes, header, section, "dynamic section");
    if (!linked.ok()) return linked.status();
    const Elf64_Shdr& strings = *linked;
    for (uint64_t off = 0; off + sizeof(Elf64_Dyn) <= section.sh_size; off += sizeof(Elf64_Dyn)) {
      KPROF_READ(dyn, bytes, Elf64_Dyn, section.sh_offset + off, "a dynamic entry");
      if (dyn.d_tag == DT_NULL) break;
      if (dyn.d_tag != DT_NEEDED && dyn.d_tag != DT_SONAME) continue;
      auto name = bytes.String(strings.sh_offset, strings.sh_size, dyn.d_un.d_val);
      if (!name.ok()) return name.status();
      if (dyn.d_tag == DT_SONAME) {
        info.soname = std::string(*name);
      } else if (info.needed.size() < kMaxNeeded) {
        info.needed.emplace_back(*name);
      } else {
        return Invalid(absl::StrCat("more than ", kMaxNeeded, " needed libraries"));
      }
    }
    return absl::OkStatus();
  }
  return absl::OkStatus();
}

absl::Status CheckSectionHeaders(const Bytes& bytes, const Elf64_Ehdr& header) {
  if (header.e_shnum == 0) return Invalid("no section headers, so no symbol table");
  if (header.e_shentsize != sizeof(Elf64_Shdr)) {
    return Invalid("malformed: section headers of an unexpected size");
  }
  if (!bytes.Contains(header.e_shoff, uint64_t{header.e_shnum} * sizeof(Elf64_Shdr))) {
    return Invalid(absl::StrCat("truncated: the section headers at offset ", header.e_shoff,
                                " lie past the end of the ", bytes.size(), "-byte file"));
  }
  return absl::OkStatus();
}

}  // namespace

std::string_view HostElfMachine() {
  static const std::string name = MachineName(HostMachine());
  return name;
}

absl::StatusOr<SharedLibraryInfo> InspectSharedLibrary(std::string_view raw) {
  const Bytes bytes(raw);
  if (absl::Status s = CheckIdent(raw); !s.ok()) return s;
  KPROF_READ(header, bytes, Elf64_Ehdr, 0, "the ELF header");

  if (header.e_machine != HostMachine()) {
    return Invalid(absl::StrCat("ELF for ", MachineName(header.e_machine), ", this host is ",
                                std::string(HostElfMachine())));
  }
  if (header.e_type == ET_EXEC) return Invalid("an executable, not a shared object");
  if (header.e_type != ET_DYN) {
    return Invalid(header.e_type == ET_REL ? "an object file (.o), not a shared object"
                                           : "an ELF that is not a shared object");
  }
  if (header.e_phnum > 0 && header.e_phentsize != sizeof(Elf64_Phdr)) {
    return Invalid("malformed: program headers of an unexpected size");
  }
  if (!bytes.Contains(header.e_phoff, uint64_t{header.e_phnum} * sizeof(Elf64_Phdr))) {
    return Invalid(absl::StrCat("truncated: the program headers at offset ", header.e_phoff,
                                " lie past the end of the ", bytes.size(), "-byte file"));
  }
  auto pie = IsPositionIndependentExecutable(bytes, header);
  if (!pie.ok()) return pie.status();
  if (*pie) return Invalid("a position-independent executable, not a shared library");

  if (header.e_shnum == 0) return Invalid("no section headers, so no dynamic symbol table");
  if (absl::Status s = CheckSectionHeaders(bytes, header); !s.ok()) return s;

  SharedLibraryInfo info;
  info.machine = std::string(HostElfMachine());
  auto found = Symbols(bytes, header, SHT_DYNSYM, [](const Elf64_Sym& symbol) {
    const unsigned type = ELF64_ST_TYPE(symbol.st_info);
    const unsigned binding = ELF64_ST_BIND(symbol.st_info);
    const unsigned visibility = ELF64_ST_VISIBILITY(symbol.st_other);
    return (type == STT_FUNC || type == STT_GNU_IFUNC) && symbol.st_shndx != SHN_UNDEF &&
           (binding == STB_GLOBAL || binding == STB_WEAK) &&
           (visibility == STV_DEFAULT || visibility == STV_PROTECTED);
  });
  if (!found.ok()) return found.status();
  const bool has_dynsym = found->first;
  for (std::string& name : found->second) {
    if (name != "_init" && name != "_fini") info.functions.push_back(std::move(name));
  }
  if (!has_dynsym) return Invalid("no dynamic symbol table");
  std::sort(info.functions.begin(), info.functions.end());
  info.functions.erase(std::unique(info.functions.begin(), info.functions.end()),
                       info.functions.end());
  if (info.functions.empty()) {
    return Invalid("a shared object that exports no functions (mark them KPROF_EXPORT)");
  }
  auto unique = Symbols(bytes, header, SHT_DYNSYM, [](const Elf64_Sym& symbol) {
    return ELF64_ST_BIND(symbol.st_info) == STB_GNU_UNIQUE && symbol.st_shndx != SHN_UNDEF;
  });
  if (!unique.ok()) return unique.status();
  if (!unique->second.empty()) {
    return Invalid(absl::StrCat(
        "defines ", unique->second.size(), unique->second.size() == 1 ? " symbol" : " symbols",
        " of GNU-unique binding (e.g. '", unique->second.front(),
        "'), which the dynamic loader shares between every module defining them: two "
        "candidates would share that state. Build it with -fno-gnu-unique (or "
        "-fvisibility=hidden)"));
  }
  if (absl::Status s = ReadDependencies(bytes, header, info); !s.ok()) return s;
  return info;
}

}  // namespace kprof::core

namespace kprof::core {

namespace {

// The shared helpers say "invalid shared-library module: ..."; for a cubin, say cubin.
absl::Status AsCubinError(const absl::Status& status) {
  constexpr std::string_view kPrefix = "invalid shared-library module: ";
  std::string message(status.message());
  if (message.rfind(kPrefix, 0) == 0) message = message.substr(kPrefix.size());
  return absl::Status(status.code(), absl::StrCat("invalid cubin: ", message));
}

absl::StatusOr<std::vector<std::string>> ReadCubinKernels(std::string_view raw) {
  constexpr unsigned char kCudaEntry = 0x10;  // STO_CUDA_ENTRY in st_other
  const Bytes bytes(raw);
  if (absl::Status s = CheckIdent(raw); !s.ok()) return s;
  KPROF_READ(header, bytes, Elf64_Ehdr, 0, "the ELF header");
  if (header.e_machine != EM_CUDA) {
    return Invalid(absl::StrCat("ELF for ", MachineName(header.e_machine), ", not for a GPU"));
  }
  if (absl::Status s = CheckSectionHeaders(bytes, header); !s.ok()) return s;
  auto found = Symbols(bytes, header, SHT_SYMTAB, [](const Elf64_Sym& symbol) {
    return ELF64_ST_TYPE(symbol.st_info) == STT_FUNC &&
           ELF64_ST_BIND(symbol.st_info) == STB_GLOBAL && symbol.st_shndx != SHN_UNDEF &&
           (symbol.st_other & kCudaEntry) != 0;
  });
  if (!found.ok()) return found.status();
  std::vector<std::string> kernels = std::move(found->second);
  std::sort(kernels.begin(), kernels.end());
  kernels.erase(std::unique(kernels.begin(), kernels.end()), kernels.end());
  if (kernels.empty()) return Invalid("no kernels (__global__ functions)");
  return kernels;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> CubinKernels(std::string_view raw) {
  absl::StatusOr<std::vector<std::string>> kernels = ReadCubinKernels(raw);
  if (!kernels.ok()) return AsCubinError(kernels.status());
  return kernels;
}

}  // namespace kprof::core
