// Writing files when the disk is full, on a real size-limited tmpfs (mounted here when the test
// runs as root, skipped with the reason otherwise); kernel files that are no source text.
#include <gtest/gtest.h>
#include <sys/mount.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "common/error.h"
#include "common/fs.h"

namespace kevo {
namespace {

// A 64 KiB tmpfs mounted at `path` for the test's lifetime.
class SmallFileSystem {
public:
    explicit SmallFileSystem(const fs::path& path) : path_(path) {
        fs::create_directories(path);
        mounted_ = ::mount("tmpfs", path.c_str(), "tmpfs", 0, "size=64k") == 0;
        if (!mounted_) error_ = std::strerror(errno);
    }
    ~SmallFileSystem() {
        if (mounted_) ::umount2(path_.c_str(), MNT_DETACH);
    }
    bool mounted() const { return mounted_; }
    const std::string& error() const { return error_; }

private:
    fs::path path_;
    bool mounted_ = false;
    std::string error_;
};

std::vector<std::string> listing(const fs::path& dir) {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
    return names;
}

TEST(WriteFileAtomic, ADiskFullSaysSoNamesThePathAndLeavesNoTempFile) {
    TempDir dir;
    const fs::path disk = dir.path() / "small";
    SmallFileSystem small(disk);
    if (!small.mounted()) GTEST_SKIP() << "cannot mount a 64 KiB tmpfs here (" << small.error() << "; needs root)";
    const fs::path file = disk / "state.json";
    write_file_atomic(file, "old");
    try {
        write_file_atomic(file, std::string(1 << 20, 'x'));
        FAIL() << "1 MiB written to a 64 KiB file system";
    } catch (const UsageError& e) {
        EXPECT_EQ(std::string(e.what()), "cannot write " + file.string() + ": No space left on device (nothing was written)");
    }
    EXPECT_EQ(listing(disk), std::vector<std::string>{"state.json"}) << "a temp file was left behind";
    EXPECT_EQ(read_file(file), "old");
    // A new file: nothing at all is left.
    EXPECT_THROW(write_file_atomic(disk / "new.json", std::string(1 << 20, 'y')), UsageError);
    EXPECT_EQ(listing(disk), std::vector<std::string>{"state.json"});
}

TEST(WriteFileAtomic, ADirectoryThatCannotBeWrittenIsNamedWithTheReason) {
    TempDir dir;
    const fs::path blocked = dir.path() / "blocked";
    write_file_atomic(blocked, "a file where a directory should be");
    try {
        write_file_atomic(blocked / "x.json", "{}");
        FAIL();
    } catch (const UsageError& e) {
        EXPECT_EQ(std::string(e.what()), "cannot write " + (blocked / "x.json").string() + ": Not a directory");
    }
}

TEST(ReadKernelFile, EmptyBlankAndBinaryFilesAreNoKernels) {
    TempDir dir;
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"", "is empty, not a kernel file"},
        {" \n\t\n", "is blank, not a kernel file"},
        {std::string("\x7f" "ELF\x02\x01\x01\0\0\0", 10), "is a binary file (a NUL byte at offset 7), not a kernel file"},
        {std::string("__global__ void k() {}\n\0", 24), "is a binary file (a NUL byte at offset 23)"},
    };
    for (const auto& [bytes, why] : cases) {
        const fs::path k = dir.path() / "k.cu";
        write_file_atomic(k, bytes);
        try {
            read_kernel_file(k, "--kernel");
            ADD_FAILURE() << "read: " << why;
        } catch (const UsageError& e) {
            EXPECT_EQ(std::string(e.what()).rfind("--kernel: " + k.string() + " " + why, 0), 0u) << e.what();
        }
    }
    write_file_atomic(dir.path() / "ok.cu", "// a kernel\n");
    EXPECT_EQ(read_kernel_file(dir.path() / "ok.cu"), "// a kernel\n");
}

}  // namespace
}  // namespace kevo
