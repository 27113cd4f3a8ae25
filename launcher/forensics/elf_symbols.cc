#include "launcher/forensics/elf_symbols.h"

#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>
#include <set>
#include <string_view>

namespace ctrun::launcher {

namespace {

// A file read by offset, every read bounded by its size.
class File {
 public:
  explicit File(int fd) : fd_(fd) {
    struct stat st {};
    if (::fstat(fd_, &st) == 0) size_ = static_cast<uint64_t>(st.st_size);
  }
  ~File() { ::close(fd_); }
  File(const File&) = delete;
  File& operator=(const File&) = delete;

  uint64_t size() const { return size_; }

  bool Read(uint64_t offset, void* out, uint64_t n) const {
    if (offset > size_ || n > size_ - offset) return false;
    auto* p = static_cast<char*>(out);
    while (n > 0) {
      const ssize_t got = ::pread(fd_, p, n, static_cast<off_t>(offset));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) return false;
      p += got;
      offset += static_cast<uint64_t>(got);
      n -= static_cast<uint64_t>(got);
    }
    return true;
  }

  bool ReadString(uint64_t offset, uint64_t n, std::string* out) const {
    out->resize(n);
    return Read(offset, out->data(), n);
  }

 private:
  int fd_;
  uint64_t size_ = 0;
};

// Symbol tables larger than this are not read (libpython's .symtab is a few
// MB; a 64 MiB table is not a CPython's).
constexpr uint64_t kMaxTableBytes = 64ull << 20;

Status ScanSymbols(const File& f, const Elf64_Shdr& symtab, const Elf64_Shdr& strtab,
                   const std::set<std::string_view>& wanted, ElfSymbols* out) {
  if (symtab.sh_entsize != sizeof(Elf64_Sym) || symtab.sh_size > kMaxTableBytes ||
      strtab.sh_size > kMaxTableBytes) {
    return Status::InvalidArgument("a symbol table has an unexpected size");
  }
  std::string syms, strs;
  if (!f.ReadString(symtab.sh_offset, symtab.sh_size, &syms) ||
      !f.ReadString(strtab.sh_offset, strtab.sh_size, &strs)) {
    return Status::InvalidArgument("a symbol table lies outside the file");
  }
  const size_t count = syms.size() / sizeof(Elf64_Sym);
  for (size_t i = 0; i < count; ++i) {
    Elf64_Sym s;
    std::memcpy(&s, syms.data() + i * sizeof s, sizeof s);
    if (s.st_name == 0 || s.st_name >= strs.size() || s.st_shndx == SHN_UNDEF) continue;
    const char* name = strs.c_str() + s.st_name;
    const size_t len = ::strnlen(name, strs.size() - s.st_name);
    const std::string_view n(name, len);
    if (wanted.count(n) != 0 && out->values.count(std::string(n)) == 0) {
      out->values.emplace(std::string(n), s.st_value);
    }
  }
  return Status::Ok();
}

}  // namespace

Result<ElfSymbols> ReadElfSymbols(const std::string& path, const std::vector<std::string>& names) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::IOError("cannot open " + path + ": " + std::strerror(errno));
  File f(fd);
  Elf64_Ehdr eh;
  if (!f.Read(0, &eh, sizeof eh) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
      eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB) {
    return Status::InvalidArgument(path + " is not a 64-bit little-endian ELF file");
  }
  ElfSymbols out;
  out.relocatable = eh.e_type == ET_DYN;

  if (eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum > 4096) {
    return Status::InvalidArgument(path + ": unexpected program headers");
  }
  bool have_load = false;
  for (uint16_t i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph;
    if (!f.Read(eh.e_phoff + uint64_t{i} * sizeof ph, &ph, sizeof ph)) {
      return Status::InvalidArgument(path + ": program headers lie outside the file");
    }
    if (ph.p_type == PT_LOAD && (!have_load || ph.p_vaddr < out.first_load_vaddr)) {
      out.first_load_vaddr = ph.p_vaddr;
      out.first_load_offset = ph.p_offset;
      have_load = true;
    }
  }
  if (!have_load) return Status::InvalidArgument(path + " has no loadable segment");

  if (eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shnum > 65000) {
    return Status::InvalidArgument(path + ": unexpected section headers");
  }
  std::vector<Elf64_Shdr> sections(eh.e_shnum);
  if (eh.e_shnum > 0 && !f.Read(eh.e_shoff, sections.data(), uint64_t{eh.e_shnum} * sizeof(Elf64_Shdr))) {
    return Status::InvalidArgument(path + ": section headers lie outside the file");
  }
  const std::set<std::string_view> wanted(names.begin(), names.end());
  // .symtab (when not stripped) first: it has the local symbols as well.
  for (uint32_t type : {SHT_SYMTAB, SHT_DYNSYM}) {
    for (const Elf64_Shdr& sh : sections) {
      if (sh.sh_type != type) continue;
      if (sh.sh_link >= sections.size()) return Status::InvalidArgument(path + ": bad symbol table link");
      if (Status st = ScanSymbols(f, sh, sections[sh.sh_link], wanted, &out); !st.ok()) {
        return Status::InvalidArgument(path + ": " + st.message());
      }
    }
  }
  return out;
}

uint64_t LoadedAddress(const ElfSymbols& elf, uint64_t value, uint64_t map_start, uint64_t map_offset) {
  if (!elf.relocatable) return value;
  constexpr uint64_t kPage = 4096;
  // The mapping of file offset `map_offset` holds virtual address
  // first_load_vaddr + (map_offset - first_load_offset), page-aligned.
  const uint64_t vaddr = (elf.first_load_vaddr & ~(kPage - 1)) + map_offset -
                         (elf.first_load_offset & ~(kPage - 1));
  return map_start - vaddr + value;
}

}  // namespace ctrun::launcher
