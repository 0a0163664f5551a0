package reconcilers

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// setCondition is how every controller sets a condition: observed at the object's
// generation, its transition time kept while its status does not change.
func setCondition(conds *[]metav1.Condition, generation int64, now time.Time, typ string, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(conds, metav1.Condition{
		Type:               typ,
		Status:             status,
		Reason:             reason,
		Message:            msg,
		ObservedGeneration: generation,
		LastTransitionTime: metav1.NewTime(now),
	})
}
