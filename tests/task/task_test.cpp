// Task files: what parses, the defaults, and every error the parser reports (file + field).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <future>
#include <memory>
#include <thread>

#include "common/error.h"
#include "common/fs.h"
#include "task/task.h"
#include "task_fixture.h"

using namespace kevo;
using nlohmann::json;

namespace {
class TaskTest : public tasktest::TaskFileTest {
protected:
    json base() const { return gelu_bias({{{"M", 4096}, {"N", 4096}}, {{"M", 33}, {"N", 1001}}}); }
    // base() with a bias of 4 elements: x and y [M, 4], bias [4], M 2 and 3 (for file inits).
    json width4() const {
        json j = base();
        j["inputs"][0]["shape"] = {"M", 4};
        j["inputs"][1]["shape"] = {4};
        j["outputs"][0]["shape"] = {"M", 4};
        j["shapes"] = {{{"M", 2}}, {{"M", 3}}};
        return j;
    }
};
}  // namespace

TEST_F(TaskTest, ParsesTheIssueExample) {
    Task t = parse(base());
    EXPECT_EQ(t.name, "gelu_bias");
    EXPECT_EQ(t.reference_function, "gelu_bias");
    EXPECT_EQ(t.reference_source, (dir.path() / "ref.cpp").lexically_normal());  // relative to the task file
    ASSERT_EQ(t.inputs.size(), 2u);
    EXPECT_EQ(t.inputs[1].shape[0].symbol, "N");
    EXPECT_EQ(t.concrete_shape(t.inputs[0], 1), (std::vector<int64_t>{33, 1001}));
    EXPECT_EQ(t.shapes.size(), 2u);
    EXPECT_DOUBLE_EQ(t.atol, 1e-4);
    EXPECT_DOUBLE_EQ(t.rtol, 1e-4);
    EXPECT_EQ(t.inputs[0].init.kind, "randn");
    EXPECT_EQ(t.correctness_trials, 5);
}

TEST_F(TaskTest, ToleranceDefaultsByDtype) {
    json j = base();
    j["inputs"][0]["dtype"] = "float16";
    j["outputs"][0]["dtype"] = "bfloat16";
    Task t = parse(j);
    EXPECT_DOUBLE_EQ(t.atol, 1e-2);
    EXPECT_DOUBLE_EQ(t.rtol, 1e-2);
    j["tolerance"] = {{"atol", 0.5}};
    t = parse(j);
    EXPECT_DOUBLE_EQ(t.atol, 0.5);
    EXPECT_DOUBLE_EQ(t.rtol, 1e-2);
}

TEST_F(TaskTest, AllDtypesAndAliases) {
    for (const char* d : {"float32", "float16", "bfloat16", "int32", "int64", "bool", "float64", "int8", "uint8", "float", "half"}) {
        json j = base();
        j["inputs"][0]["dtype"] = d;
        if (std::string(d).find("int") != std::string::npos || std::string(d) == "bool") j["inputs"][0].erase("init");
        EXPECT_NO_THROW(parse(j)) << d;
    }
    EXPECT_EQ(dtype_size(DType::BFLOAT16), 2);
    EXPECT_EQ(dtype_abi(DType::BOOL), 5);
}

TEST_F(TaskTest, DtypesComeFromTheAbiTable) {
    // Every dtype of KEVO_DTYPE_LIST parses under its name, keeps its ABI value, size and kind.
    for (int d = 0; d < KEVO_DTYPE_COUNT; ++d) {
        const char* name = kevo_dtype_name(d);
        ASSERT_NE(name, nullptr) << d;
        auto parsed = parse_dtype(name);
        ASSERT_TRUE(parsed) << name;
        EXPECT_EQ(dtype_abi(*parsed), d);
        EXPECT_STREQ(dtype_name(*parsed), name);
        EXPECT_EQ(dtype_size(*parsed), kevo_dtype_size(d));
        EXPECT_EQ(is_floating(*parsed), kevo_dtype_is_floating(d) != 0);
        EXPECT_NE(dtype_choices().find(name), std::string::npos) << dtype_choices();
    }
#define KEVO_ALIAS_CHECK_(alias, e) EXPECT_EQ(parse_dtype(alias), DType::e) << alias;
    KEVO_DTYPE_ALIAS_LIST(KEVO_ALIAS_CHECK_)
#undef KEVO_ALIAS_CHECK_
    EXPECT_FALSE(parse_dtype("float33"));
    EXPECT_FALSE(parse_dtype(""));
    EXPECT_FALSE(parse_dtype("float32 "));
    EXPECT_EQ(dtype_choices(), "float32, float16, bfloat16, int32, int64, bool, float64, int8 or uint8");
}

TEST_F(TaskTest, InitKindsComeFromTheTable) {
    // Every kind but file (its task syntax comes with its support) parses by its table name.
    for (int k = 0; k < KEVO_INIT_COUNT; ++k) {
        if (k == KEVO_INIT_FILE) continue;
        json j = base();
        j["inputs"][0]["init"] = {{"kind", kevo_init_kind_name(k)}};
        if (k == KEVO_INIT_FULL) j["inputs"][0]["init"]["value"] = 2.5;
        Task t = parse(j);
        EXPECT_EQ(t.inputs[0].init.id(), k) << kevo_init_kind_name(k);
        EXPECT_EQ(t.to_json()["inputs"][0]["init"]["kind"], kevo_init_kind_name(k));
    }
    json j = base();
    j["inputs"][0]["init"] = "gaussian";
    try {
        parse(j);
        ADD_FAILURE() << "gaussian accepted";
    } catch (const TaskError& e) {
        EXPECT_NE(std::string(e.what()).find("randn, rand, randint, ones, zeros, full, arange"), std::string::npos) << e.what();
    }
}

TEST_F(TaskTest, InitKinds) {
    json j = base();
    j["inputs"][0]["init"] = {{"kind", "randint"}, {"low", -3}, {"high", 4}};
    Task t = parse(j);
    EXPECT_EQ(t.inputs[0].init.kind, "randint");
    EXPECT_EQ(t.inputs[0].init.a, -3);
    EXPECT_EQ(t.inputs[0].init.b, 4);
    j["inputs"][0]["init"] = "ones";
    EXPECT_EQ(parse(j).inputs[0].init.kind, "ones");
    j["inputs"][0]["init"] = {{"kind", "full"}, {"value", 2.5}};
    EXPECT_EQ(parse(j).inputs[0].init.a, 2.5);
    j["inputs"][0]["init"] = {{"kind", "rand"}, {"low", 1}, {"high", 3}};
    EXPECT_EQ(parse(j).inputs[0].init.b, 3);
    // Integer inputs default to random integers, not randn.
    j = base();
    j["inputs"][1]["dtype"] = "int64";
    EXPECT_EQ(parse(j).inputs[1].init.kind, "randint");
}

TEST_F(TaskTest, LiteralShapesNeedNoShapeSets) {
    json j = base();
    j["inputs"][0]["shape"] = {8, 16};
    j["inputs"][1]["shape"] = {16};
    j["outputs"][0]["shape"] = {8, 16};
    j.erase("shapes");
    Task t = parse(j);
    ASSERT_EQ(t.shapes.size(), 1u);
    EXPECT_EQ(t.concrete_shape(t.outputs[0], 0), (std::vector<int64_t>{8, 16}));
}

TEST_F(TaskTest, HashIgnoresWhereTheFileLivesButNotWhatItSays) {
    Task a = parse(base());
    Task b = parse_task(base(), dir.path() / "sub" / ".." / "t.json");
    EXPECT_EQ(a.hash(), b.hash());
    json j = base();
    j["shapes"][1]["M"] = 34;
    EXPECT_NE(parse(j).hash(), a.hash());
    j = base();
    j["tolerance"] = 1e-3;
    EXPECT_NE(parse(j).hash(), a.hash());
    EXPECT_EQ(a.reference_hash().size(), 64u);
}

// A `c++` on PATH in place of the compiler, for the reference hash's preprocessing (the old PATH
// is put back at the end).
class FakeCompiler {
public:
    FakeCompiler(const fs::path& dir, const std::string& script) : old_(std::getenv("PATH") ? std::getenv("PATH") : "") {
        write_file_atomic(dir / "c++", "#!/bin/sh\n" + script + "\n");
        fs::permissions(dir / "c++", fs::perms::owner_all);
        ::setenv("PATH", (dir.string() + ":" + old_).c_str(), 1);
    }
    ~FakeCompiler() { ::setenv("PATH", old_.c_str(), 1); }

private:
    std::string old_;
};

// The reference hash falls back to the file's bytes only on the compiler's own verdict (it cannot
// read the file), never when its preprocessing did not finish (killed: on a loaded machine, at the
// time limit), which would give the same reference a second hash.
TEST_F(TaskTest, ReferenceHashIsAnErrorWhenThePreprocessorDoesNotFinish) {
    Task a = parse(base());
    fs::create_directories(dir.path() / "bin");
    {
        FakeCompiler cxx(dir.path() / "bin", "kill -9 $$");
        try {
            std::string h = a.reference_hash();
            ADD_FAILURE() << "a hash from a killed preprocessor: " << h << (h == a.reference_file_hash() ? " (the bytes')" : "");
        } catch (const UsageError& e) {
            EXPECT_NE(std::string(e.what()).find("hashing the reference " + a.reference_source.string() +
                                                 ": 'c++ -MM' did not finish (killed by signal 9"),
                      std::string::npos)
                << e.what();
        }
    }
    {
        FakeCompiler cxx(dir.path() / "bin", "echo 'cannot read it' >&2; exit 1");
        EXPECT_EQ(a.reference_hash(), a.reference_file_hash());
    }
    EXPECT_NE(a.reference_hash(), a.reference_file_hash()) << "the real compiler's preprocessed hash";
}

TEST_F(TaskTest, Errors) {
    json j;
    j = base(); j.erase("name");                     expect_error(j, "name", "missing");
    j = base(); j["name"] = "gelu-bias";             expect_error(j, "name", "not a C identifier");
    j = base(); j["name"] = 3;                       expect_error(j, "name", "expected a string");
    j = base(); j.erase("reference");                expect_error(j, "reference", "missing");
    j = base(); j["reference"]["source"] = "nope.cpp"; expect_error(j, "reference.source", "file not found");
    j = base(); j["reference"]["function"] = "a b"; expect_error(j, "reference.function", "not a C++ function name");
    j = base(); j["reference"]["extra"] = 1;         expect_error(j, "reference.extra", "unknown field");
    j = base(); j["inputs"] = json::array();         expect_error(j, "inputs", "non-empty array");
    j = base(); j["inputs"][1]["dtype"] = "float33"; expect_error(j, "inputs[1].dtype", "unknown dtype 'float33'");
    j = base(); j["inputs"][1].erase("shape");       expect_error(j, "inputs[1].shape", "missing");
    j = base(); j["inputs"][0]["shape"][1] = -4;     expect_error(j, "inputs[0].shape[1]", "positive");
    j = base(); j["inputs"][0]["shape"][1] = 2.5;    expect_error(j, "inputs[0].shape[1]", "expected an integer or a dimension name");
    j = base(); j["inputs"][0]["shape"] = json::array({1, 1, 1, 1, 1, 1, 1, 1, 1}); expect_error(j, "inputs[0].shape", "at most 8");
    j = base(); j["inputs"][1]["name"] = "x";        expect_error(j, "inputs[1].name", "duplicate");
    j = base(); j["outputs"][0]["name"] = "x";       expect_error(j, "outputs[0].name", "duplicate");
    j = base(); j["outputs"][0]["init"] = "ones";    expect_error(j, "outputs[0].init", "unknown field");
    j = base(); j["inputs"][0]["init"] = "gaussian"; expect_error(j, "inputs[0].init.kind", "unknown init 'gaussian'");
    j = base(); j["inputs"][0]["init"] = {{"kind", "rand"}, {"low", 2}, {"high", 1}}; expect_error(j, "inputs[0].init.high", "greater than low");
    j = base(); j["inputs"][0]["init"] = {{"kind", "full"}}; expect_error(j, "inputs[0].init.value", "missing");
    j = base(); j["inputs"][1]["dtype"] = "int32"; j["inputs"][1]["init"] = "randn"; expect_error(j, "inputs[1].init.kind", "randn needs a floating dtype");
    j = base(); j.erase("shapes");                   expect_error(j, "shapes", "needs a value");
    j = base(); j["shapes"][1].erase("N");           expect_error(j, "shapes[1]", "dimension 'N' is not bound");
    j = base(); j["shapes"][0]["K"] = 3;             expect_error(j, "shapes[0].K", "no input or output uses");
    j = base(); j["shapes"][0]["M"] = 0;             expect_error(j, "shapes[0].M", "positive");
    j = base(); j["shapes"][0]["M"] = "big";         expect_error(j, "shapes[0].M", "expected an integer");
    j = base(); j["shapes"][0]["M"] = 1LL << 40;     expect_error(j, "shapes[0]", "exceed 1 TiB");
    j = base(); j["tolerance"] = {{"atol", -1}};     expect_error(j, "tolerance", ">= 0");
    // A tolerance that admits a constant output (an all-zero one passes at 1 or more) is no check.
    j = base(); j["tolerance"] = {{"rtol", 1}};      expect_error(j, "tolerance", "rtol 1.0 would admit a constant output");
    j = base(); j["tolerance"] = 1e30;               expect_error(j, "tolerance", "atol 1e+30 would admit a constant output");
    j = base(); j["tolerance"] = {{"atol", 1e300}, {"rtol", 1e-4}}; expect_error(j, "tolerance", "must be below 1");
    j = base(); j["tolerance"] = {{"rtol", std::nan("")}}; expect_error(j, "tolerance", "rtol is not a number");
    j = base(); j["tolerance"] = "loose";            expect_error(j, "tolerance", "expected a number");
    j = base(); j["trials"] = 0;                     expect_error(j, "trials", "between 1 and 1000");
    j = base(); j["colour"] = "red";                 expect_error(j, "colour", "unknown field");
}

TEST_F(TaskTest, LoadReportsUnreadableAndInvalidJson) {
    try {
        load_task(dir.path() / "missing.json");
        ADD_FAILURE();
    } catch (const TaskError& e) {
        EXPECT_NE(std::string(e.what()).find("missing.json"), std::string::npos);
    }
    write_file_atomic(file(), "{ \"name\": ");
    try {
        load_task(file());
        ADD_FAILURE();
    } catch (const TaskError& e) {
        EXPECT_NE(std::string(e.what()).find("not valid JSON"), std::string::npos) << e.what();
    }
    write_file_atomic(file(), base().dump());
    EXPECT_EQ(load_task(file()).name, "gelu_bias");
}

// A task path that is not a task file is refused with the reason, without reading it: a directory
// (its task.json named when it has one), a FIFO (no writer: reading it would wait forever), a
// device (/dev/zero would fill the memory), a file over 16 MB.
TEST_F(TaskTest, LoadRefusesDirectoriesFifosDevicesAndHugeFilesWithoutReadingThem) {
    auto message = [](const fs::path& p) -> std::string {
        try {
            load_task(p);
        } catch (const TaskError& e) {
            EXPECT_EQ(e.file(), p.string());
            return e.what();
        }
        ADD_FAILURE() << "no error for " << p;
        return "";
    };
    write_file_atomic(file(), base().dump());   // t.json: the folder holds no task.json yet
    EXPECT_NE(message(dir.path()).find("is a directory, not a task file (and it holds no task.json)"), std::string::npos)
        << message(dir.path());
    fs::rename(file(), dir.path() / "task.json");
    EXPECT_NE(message(dir.path()).find("is a directory; give its task.json (" + (dir.path() / "task.json").string() + ")"),
              std::string::npos) << message(dir.path());

    EXPECT_NE(message("/dev/zero").find("/dev/zero: is a character device, not a task file"), std::string::npos);

    const fs::path big = dir.path() / "big.json";
    write_file_atomic(big, "{\"name\": \"" + std::string((16u << 20) + 1, 'x') + "\"}");
    EXPECT_NE(message(big).find("is too large for a task file (16.0 MB; at most 16.0 MB)"), std::string::npos) << message(big);

    // The FIFO: load_task runs on a thread; should it block, a writer is opened to release it.
    const fs::path fifo = dir.path() / "task.fifo";
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    auto done = std::make_shared<std::promise<std::string>>();
    auto result = done->get_future();
    std::thread([done, message, fifo] { done->set_value(message(fifo)); }).detach();
    if (result.wait_for(std::chrono::seconds(5)) != std::future_status::ready) {
        ADD_FAILURE() << "load_task blocked on a FIFO";
        int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
        if (fd >= 0) ::close(fd);
    }
    EXPECT_NE(result.get().find("is a FIFO (named pipe), not a task file"), std::string::npos);
    EXPECT_EQ(load_task(dir.path() / "task.json").name, "gelu_bias");   // a regular file still loads
}

// read_input_file(): the cap holds for a file that grows past it, and the plain read_file still
// reads what it always read (and names a directory).
TEST_F(TaskTest, ReadInputFileCapsAndReadFileKeepsItsContract) {
    write_file_atomic(file(), std::string(100, 'a'));
    EXPECT_EQ(read_input_file(file(), "a test file", 100), std::string(100, 'a'));
    try {
        read_input_file(file(), "a test file", 99);
        ADD_FAILURE();
    } catch (const UsageError& e) {
        EXPECT_NE(std::string(e.what()).find("is too large for a test file"), std::string::npos) << e.what();
    }
    EXPECT_EQ(read_file(file()), std::string(100, 'a'));
    try {
        read_file(dir.path());
        ADD_FAILURE();
    } catch (const UsageError& e) {
        EXPECT_NE(std::string(e.what()).find("it is a directory"), std::string::npos) << e.what();
    }
}

// The file init kind: raw little-endian bytes, path relative to the task file, exact size, content hashed.
TEST_F(TaskTest, FileInitResolvesChecksSizeAndHashesContent) {
    json j = width4();
    j["inputs"][1]["init"] = {{"kind", "file"}, {"path", "w/bias.bin"}};
    write_file_atomic(dir.path() / "w" / "bias.bin", std::string(16, '\1'));
    Task t = parse(j);
    EXPECT_EQ(t.inputs[1].init.kind, "file");
    EXPECT_EQ(t.inputs[1].init.file, dir.path() / "w" / "bias.bin");
    EXPECT_EQ(t.to_json()["inputs"][1]["init"], (json{{"kind", "file"}, {"path", "w/bias.bin"}}));
    std::string h = t.hash();
    write_file_atomic(dir.path() / "w" / "bias.bin", std::string(16, '\2'));
    EXPECT_NE(parse(j).hash(), h) << "the values of a file input are part of the task";

    write_file_atomic(dir.path() / "w" / "bias.bin", std::string(12, '\1'));
    expect_error(j, "inputs[1].init.path", "holds 12 bytes, but 'bias' in shapes[0] needs 16");
    j["inputs"][1]["init"]["path"] = "missing.bin";
    expect_error(j, "inputs[1].init.path", "file not found: " + (dir.path() / "missing.bin").string());
    j["inputs"][1]["init"] = {{"kind", "file"}};
    expect_error(j, "inputs[1].init.path", "missing (required)");
    j["inputs"][1]["init"] = {{"kind", "rand"}, {"path", "w/bias.bin"}};
    expect_error(j, "inputs[1].init.path", "only the file init takes a path");
    // A file input whose size differs between shape sets cannot be.
    write_file_atomic(dir.path() / "w" / "x.bin", std::string(32, '\0'));
    j = width4();
    j["inputs"][0]["init"] = {{"kind", "file"}, {"path", "w/x.bin"}};
    expect_error(j, "inputs[0].init.path", "in shapes[1] needs 48");
}

// "parameter": true marks a file input as a model's parameter (the judge varies its values): written
// back, part of the hash (a task without it keeps its old hash), only on a file init, only a boolean.
TEST_F(TaskTest, FileInitParameterFlag) {
    json j = width4();
    j["inputs"][1]["init"] = {{"kind", "file"}, {"path", "bias.bin"}};
    write_file_atomic(dir.path() / "bias.bin", std::string(16, '\1'));
    const Task plain = parse(j);
    EXPECT_FALSE(plain.inputs[1].init.parameter);
    EXPECT_FALSE(plain.to_json()["inputs"][1]["init"].contains("parameter"));
    j["inputs"][1]["init"]["parameter"] = false;
    EXPECT_EQ(parse(j).hash(), plain.hash()) << "false is the default";
    j["inputs"][1]["init"]["parameter"] = true;
    const Task param = parse(j);
    EXPECT_TRUE(param.inputs[1].init.parameter);
    EXPECT_EQ(param.to_json()["inputs"][1]["init"], (json{{"kind", "file"}, {"path", "bias.bin"}, {"parameter", true}}));
    EXPECT_NE(param.hash(), plain.hash()) << "the judge draws other values for a parameter";
    j["inputs"][1]["init"]["parameter"] = "yes";
    expect_error(j, "inputs[1].init.parameter", "expected true or false");
    j["inputs"][0]["init"] = {{"kind", "randn"}, {"parameter", true}};
    expect_error(j, "inputs[0].init.parameter", "only a file init can be a parameter");
}

TEST_F(TaskTest, UnknownInitKindListsTheTable) {
    json j = base();
    j["inputs"][0]["init"] = "gaussian";
    expect_error(j, "inputs[0].init.kind", "randn, rand, randint, ones, zeros, full, arange, file");
}

// reference.signature / setup / arg: the generic (TorchScript) reference of imported tasks.
TEST_F(TaskTest, ReferenceSetupArgAndSignature) {
    write_file_atomic(dir.path() / "model.pt", "model v1");
    json j = base();
    j["reference"] = {{"source", "ref.cpp"}, {"function", "kb::forward"}, {"signature", "vector"},
                      {"setup", "kb::setup"}, {"arg", "model.pt"}};
    Task t = parse(j);
    EXPECT_EQ(t.reference_signature, "vector");
    EXPECT_EQ(t.reference_setup, "kb::setup");
    EXPECT_EQ(t.reference_arg, dir.path() / "model.pt");
    EXPECT_EQ(t.to_json()["reference"]["arg"], "model.pt");
    std::string rh = t.reference_hash();
    write_file_atomic(dir.path() / "model.pt", "model v2");
    EXPECT_NE(parse(j).reference_hash(), rh) << "the setup argument's content is part of the reference";
    // A plain task's canonical JSON (which CMake hashes too) has none of these fields.
    EXPECT_FALSE(parse(base()).to_json()["reference"].contains("signature"));
    EXPECT_FALSE(parse(base()).to_json()["reference"].contains("setup"));

    json k = j;
    k["reference"]["signature"] = "tuple";
    expect_error(k, "reference.signature", "unknown signature 'tuple' (expected one of: tensors, vector)");
    k = j;
    k["reference"].erase("setup");
    expect_error(k, "reference.arg", "given without reference.setup");
    k = j;
    k["reference"]["arg"] = "nope.pt";
    expect_error(k, "reference.arg", "file not found");
    k = j;
    k["reference"]["setup"] = "kb::1setup";
    expect_error(k, "reference.setup", "is not a C++ function name");
}

// reference.show (what prompts show for a wrapper reference) and tolerance.policy: kept, round-
// tripped, but not hashed: they change what the LLM reads, not what a kernel must compute.
TEST_F(TaskTest, ReferenceShowAndTolerancePolicyAreKeptButNotHashed) {
    write_file_atomic(dir.path() / "problem.py", "class Model: pass\n");
    json j = base();
    j["reference"]["show"] = json::array({{{"file", "problem.py"}, {"language", "python"}, {"title", "The model"}}});
    j["tolerance"] = {{"atol", 2e-4}, {"rtol", 2e-4}, {"policy", "10x the fp32 reference's own error"}};
    Task t = parse(j);
    ASSERT_EQ(t.reference_show.size(), 1u);
    EXPECT_EQ(t.reference_show[0].path, dir.path() / "problem.py");
    EXPECT_EQ(t.reference_show[0].language, "python");
    EXPECT_EQ(t.reference_show[0].title, "The model");
    EXPECT_EQ(t.tolerance_policy, "10x the fp32 reference's own error");
    EXPECT_EQ(t.to_json()["reference"]["show"][0]["file"], "problem.py");
    EXPECT_EQ(t.to_json()["tolerance"]["policy"], "10x the fp32 reference's own error");
    json plain = base();
    plain["tolerance"] = {{"atol", 2e-4}, {"rtol", 2e-4}};
    EXPECT_EQ(t.hash(), parse(plain).hash());
    EXPECT_FALSE(parse(plain).to_json()["reference"].contains("show"));

    json k = j;
    k["reference"]["show"][0]["titel"] = "x";
    expect_error(k, "reference.show[0].titel", "unknown field");
    k = j;
    k["reference"]["show"][0]["file"] = "nope.py";
    expect_error(k, "reference.show[0].file", "file not found");
    k = j;
    k["reference"]["show"] = json::array();
    expect_error(k, "reference.show", "expected a list");
    k = j;
    k["tolerance"]["policy"] = 3;
    expect_error(k, "tolerance.policy", "expected a string");
}
