#include "rendezvous/grpc/net/credentials.h"

#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/support/channel_arguments.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace ctrun::rdzv {
namespace {

// Larger than any sane PEM bundle; guards against pointing at /dev/zero.
constexpr std::streamsize kMaxFileBytes = 1 << 20;

Result<std::string> ReadSmallFile(const std::string& path, const std::string& flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return Status::InvalidArgument(flag + " '" + path + "': cannot read it (" + std::strerror(errno) +
                                   "); give a readable file");
  }
  std::string text;
  text.resize(static_cast<size_t>(kMaxFileBytes) + 1);
  in.read(text.data(), kMaxFileBytes + 1);
  if (in.bad()) {
    return Status::InvalidArgument(flag + " '" + path + "': cannot read it (is it a directory?); give a readable file");
  }
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > static_cast<size_t>(kMaxFileBytes)) {
    return Status::InvalidArgument(flag + " '" + path + "': larger than 1 MiB; give the PEM or token file itself");
  }
  return text;
}

struct BioDeleter {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Deleter {
  void operator()(X509* x) const { X509_free(x); }
};
struct KeyDeleter {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
using BioPtr = std::unique_ptr<BIO, BioDeleter>;
using X509Ptr = std::unique_ptr<X509, X509Deleter>;
using KeyPtr = std::unique_ptr<EVP_PKEY, KeyDeleter>;

BioPtr MemBio(const std::string& text) {
  return BioPtr(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
}

// The first certificate in `pem`; null when there is none. Counts them all
// in `count`.
X509Ptr FirstCertificate(const std::string& pem, int& count) {
  count = 0;
  BioPtr bio = MemBio(pem);
  X509Ptr first;
  while (X509* x = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
    if (!first) {
      first.reset(x);
    } else {
      X509_free(x);
    }
    ++count;
  }
  ERR_clear_error();  // the read that ends the loop always fails
  return first;
}

Status BadPem(const std::string& flag, const std::string& path, const std::string& what) {
  return Status::InvalidArgument(flag + " '" + path + "': " + what);
}

Result<std::string> LoadCertificates(const std::string& path, const std::string& flag, const char* kind) {
  Result<std::string> pem = ReadSmallFile(path, flag);
  if (!pem.ok()) return pem.status();
  int count = 0;
  X509Ptr cert = FirstCertificate(*pem, count);
  if (!cert) {
    return BadPem(flag, path, std::string("no PEM certificate in it (give the ") + kind +
                                  " as PEM, '-----BEGIN CERTIFICATE-----')");
  }
  if (X509_cmp_current_time(X509_get0_notAfter(cert.get())) < 0) {
    return BadPem(flag, path, "the certificate has expired (issue a new one)");
  }
  return pem;
}

}  // namespace

Result<TlsConfig> LoadTls(const TlsFiles& files) {
  TlsConfig tls;
  tls.server_name = files.server_name;
  if (files.cert.empty() != files.key.empty()) {
    return Status::InvalidArgument(files.cert.empty()
                                       ? files.key_flag + " given without " + files.cert_flag +
                                             ": give both (the certificate and its private key)"
                                       : files.cert_flag + " given without " + files.key_flag +
                                             ": give both (the certificate and its private key)");
  }
  if (!files.cert.empty()) {
    Result<std::string> cert = LoadCertificates(files.cert, files.cert_flag, "certificate");
    if (!cert.ok()) return cert.status();
    Result<std::string> key = ReadSmallFile(files.key, files.key_flag);
    if (!key.ok()) return key.status();
    BioPtr bio = MemBio(*key);
    KeyPtr pkey(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
    ERR_clear_error();
    if (!pkey) {
      return BadPem(files.key_flag, files.key,
                    "no unencrypted PEM private key in it (give the key as PEM, '-----BEGIN PRIVATE KEY-----')");
    }
    int count = 0;
    X509Ptr leaf = FirstCertificate(*cert, count);
    if (X509_check_private_key(leaf.get(), pkey.get()) != 1) {
      ERR_clear_error();
      return Status::InvalidArgument(files.key_flag + " '" + files.key + "' is not the key of " + files.cert_flag +
                                     " '" + files.cert + "': give the key the certificate was issued for");
    }
    tls.cert_pem = std::move(*cert);
    tls.key_pem = std::move(*key);
  }
  if (!files.ca.empty()) {
    Result<std::string> ca = LoadCertificates(files.ca, files.ca_flag, "CA certificate");
    if (!ca.ok()) return ca.status();
    tls.ca_pem = std::move(*ca);
  }
  return tls;
}

Status CheckToken(const std::string& token, const std::string& source) {
  for (char c : token) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u > 0x7e) {
      return Status::InvalidArgument(source +
                                     ": the token must be one line of printable ASCII (e.g. the output of "
                                     "'openssl rand -hex 32')");
    }
  }
  return Status::Ok();
}

Result<std::string> ReadTokenFile(const std::string& path, const std::string& flag) {
  Result<std::string> text = ReadSmallFile(path, flag);
  if (!text.ok()) return text.status();
  std::string token = std::move(*text);
  while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back()))) token.pop_back();
  if (token.empty()) {
    return Status::InvalidArgument(flag + " '" + path + "': the file is empty; put the shared token in it");
  }
  CTRUN_RETURN_IF_ERROR(CheckToken(token, flag + " '" + path + "'"));
  return token;
}

std::shared_ptr<grpc::ServerCredentials> ServerCredentialsFor(const TlsConfig& tls) {
  if (!tls.ServerSide()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions options(
      tls.ca_pem.empty() ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                         : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  options.pem_root_certs = tls.ca_pem;
  options.pem_key_cert_pairs.push_back({tls.key_pem, tls.cert_pem});
  return grpc::SslServerCredentials(options);
}

std::shared_ptr<grpc::ChannelCredentials> ChannelCredentialsFor(const TlsConfig& tls,
                                                                grpc::ChannelArguments& args) {
  if (!tls.ClientSide()) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = tls.ca_pem;
  options.pem_private_key = tls.key_pem;
  options.pem_cert_chain = tls.cert_pem;
  if (!tls.server_name.empty()) args.SetSslTargetNameOverride(tls.server_name);
  return grpc::SslCredentials(options);
}

}  // namespace ctrun::rdzv
