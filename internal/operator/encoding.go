package operator

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/runtime/serializer/cbor"
	clientfeatures "k8s.io/client-go/features"
)

// APIEncoding is how the Sandbox informer, the operator's largest (one Sandbox per pool
// member and per claim), reads its lists and watches: the rest of the operator's requests are
// controller-runtime's (JSON for custom resources, protobuf for built-in kinds).
type APIEncoding string

const (
	// APIEncodingJSONFramer reads JSON through the Sandbox informer's own framing and
	// decoding (sandboxwatch.go): three reads of each event's bytes instead of client-go's nine.
	APIEncodingJSONFramer APIEncoding = "json-framer"
	// APIEncodingJSON reads JSON as client-go does for every custom resource.
	APIEncodingJSON APIEncoding = "json"
	// APIEncodingCBOR asks for CBOR (KEP-4222), which an API server with the
	// CBORServingAndStorage feature gate serves for custom resources, and reads the JSON of
	// one without it as APIEncodingJSONFramer does: the request's Accept header names CBOR
	// first and any other type after it, so a server that does not serve CBOR answers in JSON.
	APIEncodingCBOR APIEncoding = "cbor"
)

// APIEncodings are the valid APIEncoding values, in the order of the flag's help.
var APIEncodings = []APIEncoding{APIEncodingJSONFramer, APIEncodingJSON, APIEncodingCBOR}

func (e APIEncoding) validate() error {
	for _, v := range APIEncodings {
		if e == v {
			return nil
		}
	}
	return fmt.Errorf("invalid Options.APIEncoding: must be one of %q, got %q", APIEncodings, e)
}

// cborCodecs are the codec factory's serializers of scheme with CBOR's beside them:
// controller-runtime's and client-go's own factories have none for a typed client.
func cborCodecs(scheme *runtime.Scheme) serializer.CodecFactory {
	return serializer.NewCodecFactory(scheme, serializer.WithSerializer(cbor.NewSerializerInfo))
}

// allowClientCBOR turns client-go's ClientsAllowCBOR gate on for the process, as the
// environment variable KUBE_FEATURE_ClientsAllowCBOR=true does: without it a REST client
// configured for CBOR is silently turned to JSON when it is built, and cannot read a watch's
// "application/cbor-seq" stream. It changes nothing for the clients that ask for JSON or
// protobuf (ClientsPreferCBOR, which would make CBOR every client's default, stays off).
func allowClientCBOR() error {
	gates := clientfeatures.FeatureGates()
	if gates.Enabled(clientfeatures.ClientsAllowCBOR) {
		return nil
	}
	settable, ok := gates.(interface {
		Set(clientfeatures.Feature, bool) error
	})
	if !ok {
		return errors.New("reading the API in CBOR: client-go's feature gates cannot be set here; set KUBE_FEATURE_ClientsAllowCBOR=true")
	}
	if err := settable.Set(clientfeatures.ClientsAllowCBOR, true); err != nil {
		return fmt.Errorf("reading the API in CBOR: %w", err)
	}
	return nil
}
